package browsertest

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/chromedp/chromedp"
	"go.uber.org/zap/zaptest"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/clock"
	"github.com/omnibusmq/omnibus/core/namespace"
	"github.com/omnibusmq/omnibus/core/sas"
	"github.com/omnibusmq/omnibus/httpgw"
	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/memstore"
)

// TestNamespacePickerInChromium: logged in with the root key, the page
// shows a namespace picker; picking another namespace shows that
// namespace's queues and not the default one's.
func TestNamespacePickerInChromium(t *testing.T) {
	st := memstore.New()
	reg, err := namespace.Open(namespace.Config{Store: st, DefaultName: "sbemulatorns",
		RootRules: []sas.Rule{{KeyName: "RootManageSharedAccessKey", Key: "SAS_KEY_VALUE", Rights: sas.Manage}},
		NewBroker: func(name string, s storage.Store, c clock.Clock) (*core.Broker, error) {
			return core.New(core.Config{Store: s, Clock: c, Namespace: name})
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	bg := context.Background()
	shop, err := reg.Create(bg, "shop", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Default().Broker().CreateEntity(bg, core.Entity{Kind: core.KindQueue, Name: "default-orders"}); err != nil {
		t.Fatal(err)
	}
	if _, err := shop.Broker().CreateEntity(bg, core.Entity{Kind: core.KindQueue, Name: "shop-orders"}); err != nil {
		t.Fatal(err)
	}
	gw, err := httpgw.New(httpgw.Config{Namespaces: reg, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(gw.Handler())
	srv.Config = gw.Server("")
	srv.Start()
	t.Cleanup(srv.Close)

	p := &page{t: t, ctx: browser(t), shots: artifactsDir(t)}
	p.do(chromedp.Navigate(srv.URL + "/console"))
	p.waitFor("the login form", `!!document.getElementById('login')`)
	p.fill("input[name=key]", "SAS_KEY_VALUE")
	p.click("#login")
	p.waitText("table.list", "default-orders")
	p.waitFor("the namespace picker", `!!document.getElementById('namespace') && document.getElementById('namespace').options.length === 2`)
	p.shot("ns-01-picker")
	var picked bool
	p.eval(`(() => { const s = document.getElementById('namespace'); s.value = 'shop'; s.dispatchEvent(new Event('change')); return true; })()`, &picked)
	p.waitText("table.list", "shop-orders")
	var shows bool
	p.eval(`document.querySelector('table.list').textContent.includes('default-orders')`, &shows)
	if shows {
		t.Error("after picking shop the page still lists the default namespace's queue")
	}
	p.waitFor("the picker on shop", `document.getElementById('namespace') && document.getElementById('namespace').value === 'shop'`)
	p.shot("ns-02-shop")
}
