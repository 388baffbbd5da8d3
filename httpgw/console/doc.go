// Package console is omnibus's web console: a page served by the broker
// itself at /console (HTML, CSS and JavaScript embedded in the binary, no
// build step, nothing loaded from elsewhere, so it works air-gapped) and
// the small JSON API the page needs for what the gateway's REST and ATOM
// endpoints do not offer.
//
// The page logs in with a SAS key name and key (the API checks the key and
// hands back a SAS token lasting [Config.SessionTTL]) or with a pasted SAS
// token, keeps the token in the tab's sessionStorage and sends it in the
// Authorization header of every call. It sends, receives, completes and
// abandons messages and creates, changes and deletes entities and rules
// through the gateway's REST and ATOM endpoints, as any client would; the
// API (under /console/$api/) adds what those lack: the namespace with
// counts, paged peek of active, dead-lettered, scheduled and deferred
// messages, dead-letter and defer of a locked message, resubmit from the
// dead-letter subqueue, purge, sessions, and SQL filter checking. Every
// API handler calls the same [core.Broker] methods the fronts call, and
// checks the token's rights as the REST API does for the same operation.
//
// Security: API calls without a valid token get 401; calls a page of
// another origin makes (Origin or Sec-Fetch-Site say so) get 403, and a
// POST must be application/json, which an HTML form cannot send. The page
// sets text with textContent only, and a Content-Security-Policy allows
// no script but the console's own file, so message content cannot run.
package console
