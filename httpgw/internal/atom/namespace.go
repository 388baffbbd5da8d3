package atom

import "time"

// NamespaceInfo is the content of GET /$namespaceinfo.
type NamespaceInfo struct {
	CreatedTime time.Time
	// MessagingSKU is "Basic", "Standard" or "Premium".
	MessagingSKU string
	// MessagingUnits is reported for Premium only; 0 omits it.
	MessagingUnits int64
	ModifiedTime   time.Time
	Name           string
	// NamespaceType is "" (written as "Messaging") or another type name.
	NamespaceType string
}

func (n *NamespaceInfo) encode(x *writer) {
	x.open("NamespaceInfo", "xmlns", nsConnect, "xmlns:i", nsInstance)
	x.time("CreatedTime", n.CreatedTime)
	x.text("MessagingSKU", n.MessagingSKU)
	if n.MessagingUnits > 0 {
		x.int("MessagingUnits", n.MessagingUnits)
	}
	x.time("ModifiedTime", n.ModifiedTime)
	x.text("Name", n.Name)
	x.text("NamespaceType", orDefault(n.NamespaceType, "Messaging"))
	x.close("NamespaceInfo")
}

// namespaceXML is a NamespaceInfo as decoded.
type namespaceXML struct {
	CreatedTime    *string `xml:"CreatedTime"`
	MessagingSKU   *string `xml:"MessagingSKU"`
	MessagingUnits *string `xml:"MessagingUnits"`
	ModifiedTime   *string `xml:"ModifiedTime"`
	Name           *string `xml:"Name"`
	NamespaceType  *string `xml:"NamespaceType"`
}

func (in *namespaceXML) description() (*NamespaceInfo, error) {
	n := NamespaceInfo{NamespaceType: "Messaging"}
	var f fields
	f.time("CreatedTime", &n.CreatedTime, in.CreatedTime)
	f.word(&n.MessagingSKU, in.MessagingSKU)
	f.int64("MessagingUnits", &n.MessagingUnits, in.MessagingUnits)
	f.time("ModifiedTime", &n.ModifiedTime, in.ModifiedTime)
	f.str(&n.Name, in.Name)
	f.word(&n.NamespaceType, in.NamespaceType)
	if f.err != nil {
		return nil, f.err
	}
	return &n, nil
}
