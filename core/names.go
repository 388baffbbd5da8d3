package core

import (
	"fmt"
	"strings"
)

// Entity names, as Service Bus validates them (Azure's naming rules for
// Microsoft.ServiceBus, the quotas page and the SDKs' EntityNameFormatter):
//
//   - a queue or topic name is a path of 1 to 260 characters: letters,
//     digits, '.', '-', '_' and '/', starting and ending with a letter or
//     digit, so never with '/';
//   - a subscription or rule name is 1 to 50 such characters without '/'
//     (a rule may also be named $Default, the rule Service Bus makes);
//   - no segment of a path is empty, "." or ".." (beyond the documented
//     rules: such a path reads differently once a URL is resolved, and a
//     token scoped to "a" must not reach "a/../orders").
//
// Letters and digits are ASCII ones: Azure's "alphanumeric" is a-z, A-Z
// and 0-9. The error texts are Service Bus's where the service's or an
// SDK's is known.

// Name length limits.
const (
	MaxPathNameLength = 260 // queue and topic names
	MaxLeafNameLength = 50  // subscription and rule names
)

// nameWhat says what a name names, for the error texts.
type nameWhat string

// checkPathName checks a queue or topic name.
func checkPathName(what nameWhat, name string) error {
	if err := checkNameShape(what, name, MaxPathNameLength); err != nil {
		return err
	}
	for seg := range strings.SplitSeq(name, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return errf(CodeBadRequest, "The %s name '%s' has an empty, '.' or '..' segment; Service Bus allows none.", what, name)
		}
	}
	return nil
}

// checkLeafName checks a subscription or rule name: no '/' at all.
func checkLeafName(what nameWhat, name string) error {
	if err := checkNameShape(what, name, MaxLeafNameLength); err != nil {
		return err
	}
	if strings.Contains(name, "/") {
		return errf(CodeBadRequest, "The %s name '%s' contains an invalid character '/'.", what, name)
	}
	return nil
}

// checkNameShape checks what queue, topic, subscription and rule names
// share: length, characters, and the first and last character.
func checkNameShape(what nameWhat, name string, limit int) error {
	switch {
	case name == "":
		return errf(CodeBadRequest, "The %s name cannot be empty.", what)
	case len(name) > limit:
		return errf(CodeBadRequest, "Entity path '%s' exceeds the '%d' character limit.", truncateName(name), limit)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !isNameChar(c) && c != '/' {
			return errf(CodeBadRequest, "'%s' contains character(s) that is not allowed by Service Bus. Entity segments can contain only letters, numbers, periods (.), hyphens (-), and underscores (_).", name)
		}
	}
	if name[0] == '/' || name[len(name)-1] == '/' {
		return errf(CodeBadRequest, "The entity name/path cannot contain '/' as prefix or suffix. The supplied value is '%s'.", name)
	}
	if !isAlnum(name[0]) || !isAlnum(name[len(name)-1]) {
		return errf(CodeBadRequest, "The %s name '%s' must start and end with a letter or a number.", what, name)
	}
	return nil
}

// isNameChar reports whether c may appear in a name segment.
func isNameChar(c byte) bool { return isAlnum(c) || c == '.' || c == '-' || c == '_' }

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// truncateName shortens an over-long name for an error text, which must
// stay bounded whatever a peer sends.
func truncateName(name string) string {
	const keep = 300
	if len(name) <= keep {
		return name
	}
	return fmt.Sprintf("%s…(%d bytes)", name[:keep], len(name))
}
