package browsertest

import (
	"context"
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/omnibusmq/omnibus/core"
)

// TestConsoleInChromium walks the console as a person would: log in,
// create a queue, send a message whose body and property hold markup,
// peek it (shown as text, not run), receive it with a lock and
// dead-letter it, resubmit it from the dead-letter queue (opening it by
// keyboard), purge the queue, edit its settings, create a topic and a
// subscription, delete the queue; then the rule editor's parser error,
// the sessions of a session queue, live rates, and the namespace on a
// phone. At each step it checks what the
// page shows and, through the broker itself, what happened.
func TestConsoleInChromium(t *testing.T) {
	env := newEnv(t)
	ctx := browser(t)
	p := &page{t: t, ctx: ctx, shots: artifactsDir(t)}
	b := env.broker
	bg := context.Background()
	ok := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	// Some namespace to look at: queues with messages, a topic with a
	// subscription, a session queue.
	for i := range 3 {
		name := fmt.Sprintf("billing-%d", i)
		ok(b.CreateEntity(bg, core.Entity{Kind: core.KindQueue, Name: name}))
		for j := range 5 * (i + 1) {
			ok(b.Send(bg, name, &core.Message{Body: []byte(fmt.Sprintf(`{"invoice": %d}`, j)), ContentType: "application/json"}))
		}
	}
	ok(b.CreateEntity(bg, core.Entity{Kind: core.KindTopic, Name: "events"}))
	ok(b.CreateEntity(bg, core.Entity{Kind: core.KindSubscription, Topic: "events", Name: "audit"}))
	ok(b.CreateEntity(bg, core.Entity{Kind: core.KindQueue, Name: "carts", RequiresSession: true}))
	ok(b.Send(bg, "carts", &core.Message{SessionID: "cart-42", Body: []byte("add apples")}, &core.Message{SessionID: "cart-7", Body: []byte("checkout")}))

	// Log in with the emulator's key.
	p.do(chromedp.Navigate(env.url + "/console"))
	p.waitFor("the login form", `!!document.getElementById('login')`)
	p.fill("input[name=key]", "wrong")
	p.click("#login")
	p.waitText(".login .error", "wrong")
	p.shot("01-login")
	p.fill("input[name=key]", "SAS_KEY_VALUE")
	p.click("#login")
	p.waitText("main h1", "Queues")
	p.waitText("table.list", "billing-2")

	// The create form holds names to Service Bus's rules before sending
	// anything, and shows the server's own refusal of a value out of range.
	p.clickText("New queue")
	for _, bad := range []string{"a/../orders", "a//b", "-orders", "orders/", "a~b"} {
		p.fill("#new-name", bad)
		var mismatch bool
		p.eval(`document.getElementById('new-name').validity.patternMismatch`, &mismatch)
		if !mismatch {
			t.Errorf("the create form takes the queue name %q", bad)
		}
	}
	p.click("#create")
	p.fill("#new-name", "small")
	p.fill("#f-MaxSizeInMegabytes", "1")
	p.click("#create")
	p.waitText("#toasts", "The specified value 1 is invalid. The property 'MaxSizeInMegabytes', must be one of the following values")
	if qs, err := b.ListEntities(core.KindQueue, ""); err != nil || len(qs) != 4 {
		t.Fatalf("queues after the refused creates: %d, %v; want the 4 made before", len(qs), err)
	}

	// Create a queue through the form (ATOM PUT).
	p.fill("#f-MaxSizeInMegabytes", "")
	p.fill("#new-name", "orders")
	p.click("#create")
	p.waitText("main h1", "orders")
	if _, err := b.GetEntity("orders"); err != nil {
		t.Fatalf("the queue the page created: %v", err)
	}

	// Send a message whose body and custom property hold markup.
	p.clickText("Send")
	p.fill("#send-body", `{"id": 1, "note": "<script>window.__xss = 1</script><img src=x onerror=\"window.__xss = 2\">"}`)
	p.click("#add-prop")
	p.fill(".p-name", "region")
	p.fill(".p-value", `<b id="injected">eu</b>`)
	p.click("#send")
	p.waitText("#toasts", "Sent to orders")
	if c := counts(t, b, "orders"); c.Active != 1 {
		t.Fatalf("after the page's send the queue holds %d active messages, want 1", c.Active)
	}

	// Peek it: body pretty-printed as text, property as text, nothing run.
	p.clickText("Messages")
	p.waitFor("the message row", `!!document.querySelector('tr[data-seq]')`)
	p.click("tr[data-seq]")
	p.waitText("#message-body", `"note": "<script>window.__xss = 1</script>`)
	p.waitText("#message-props", `<b id="injected">eu</b>`)
	var injected bool
	p.eval(`window.__xss !== undefined || !!document.getElementById('injected') || document.querySelectorAll('main script, main img').length > 0`, &injected)
	if injected {
		t.Fatal("message content was run or parsed as markup; it must show as text")
	}
	p.shot("02-peek")

	// Receive it with a lock and dead-letter it.
	p.clickText("Receive")
	p.click("#receive")
	p.waitFor("the settle buttons", `!!document.getElementById('settle-deadletter')`)
	p.waitText("#message-body", "<script>")
	p.fill("#dl-reason", "checked-by-test")
	p.shot("03-locked")
	p.click("#settle-deadletter")
	p.waitText("#toasts", "dead-lettered")
	if c := counts(t, b, "orders"); c.Active != 0 || c.DeadLetter != 1 {
		t.Fatalf("after dead-lettering: active %d, dead-lettered %d; want 0 and 1", c.Active, c.DeadLetter)
	}

	// The dead-letter queue shows it with its reason; resubmit it.
	p.clickText("Messages")
	p.click(`button[data-state=deadletter]`)
	p.waitText("table.messages", "checked-by-test")
	p.shot("04-dead-letter")
	p.click(`tr[data-seq] input[type=checkbox]`)
	p.click("#resubmit-selected")
	p.click("#confirm-ok")
	p.waitText("#toasts", "Resubmitted 1 message")
	if c := counts(t, b, "orders"); c.Active != 1 || c.DeadLetter != 0 {
		t.Fatalf("after resubmit: active %d, dead-lettered %d; want 1 and 0", c.Active, c.DeadLetter)
	}
	p.waitText("table.messages", "No messages here")
	p.click(`button[data-state=active]`)
	p.waitFor("the resubmitted message", `!!document.querySelector('tr[data-seq]')`)
	// By keyboard: a row takes the focus and Enter opens it.
	p.do(chromedp.Focus(chromedp.CSS("tr[data-seq]")), chromedp.KeyEvent("\r"))
	p.waitText("#message-body", "<script>")

	// Purge the queue, confirming.
	p.click("#purge")
	p.waitFor("the confirmation", `document.getElementById('confirm').open`)
	p.shot("05-confirm-purge")
	p.click("#confirm-ok")
	p.waitText("#toasts", "Purged 1 message")
	if c := counts(t, b, "orders"); c.Total != 0 {
		t.Fatalf("after purge the queue holds %d messages, want 0", c.Total)
	}
	p.waitText("table.messages", "No messages here")

	// Edit the queue's settings (ATOM GET, then PUT with If-Match).
	p.clickText("Settings")
	p.waitFor("the settings form", `!!document.getElementById('f-MaxDeliveryCount')`)
	p.fill("#f-MaxDeliveryCount", "3")
	p.click("#save")
	p.waitText("#toasts", "Saved orders")
	if q, err := b.GetEntity("orders"); err != nil || q.MaxDeliveryCount != 3 {
		t.Fatalf("after the settings form: %+v, %v; want MaxDeliveryCount 3", q, err)
	}

	// A topic and a subscription through the forms.
	p.open("#/topics")
	p.clickText("New topic")
	p.fill("#new-name", "news")
	p.click("#create")
	p.waitText("main h1", "news")
	p.clickText("New subscription")
	p.fill("#new-name", "readers")
	p.click("#create")
	p.waitText("main h1", "readers")
	if _, err := b.GetEntity("news/Subscriptions/readers"); err != nil {
		t.Fatalf("the subscription the page created: %v", err)
	}

	// Delete the queue, confirming.
	p.open("#/entity/orders/settings")
	p.click("#delete")
	p.click("#confirm-ok")
	p.waitText("#toasts", "Deleted orders")
	if _, err := b.GetEntity("orders"); core.CodeOf(err) != core.CodeNotFound {
		t.Fatalf("after delete the queue is still there: %v", err)
	}

	// The rule editor shows the parser's error with line and column and
	// will not save it.
	p.open("#/entity/" + "events%2FSubscriptions%2Faudit" + "/rules")
	p.waitText("main h1", "audit")
	p.click("#add-rule")
	p.fill("#rule-name", "big")
	p.fill("#rule-filter", "amount > 100\nAND (region = 'eu'")
	p.waitText("#filter-check", "Line 2, column")
	var disabled bool
	p.eval(`document.getElementById('save-rule').disabled`, &disabled)
	if !disabled {
		t.Fatal("the rule editor lets an invalid filter be saved")
	}
	p.shot("06-rule-editor")
	p.fill("#rule-filter", "amount > 100\nAND region = 'eu'")
	p.waitText("#filter-check", "valid")
	p.click("#save-rule")
	p.waitText("table.list", "region = 'eu'")
	rules, err := b.ListRules("events/Subscriptions/audit")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range rules {
		found = found || r.Name == "big"
	}
	if !found {
		t.Fatalf("the rule the page saved is not on the subscription: %+v", rules)
	}
	// Edit it (ATOM PUT with If-Match), with an action.
	p.click(`button[aria-label="Edit rule big"]`)
	p.fill("#rule-filter", "amount > 500")
	p.fill("#rule-action", "SET sys.Label = 'big'")
	p.waitText("#action-check", "valid")
	p.click("#save-rule")
	p.waitText("table.list", "amount > 500")
	if rules, err = b.ListRules("events/Subscriptions/audit"); err != nil {
		t.Fatal(err)
	}
	edited := false
	for _, r := range rules {
		edited = edited || (r.Name == "big" && r.Filter.SQL == "amount > 500" && r.Action == "SET sys.Label = 'big'")
	}
	if !edited {
		t.Fatalf("after editing rule big: %+v", rules)
	}

	// Receive and delete, then lock and complete, abandon, defer, on a
	// queue of five.
	var set bool
	p.open("#/entity/billing-0/receive")
	p.waitFor("the receive form", `!!document.getElementById('receive-mode')`)
	p.eval(`(() => { const s = document.getElementById('receive-mode'); s.value = 'delete'; s.dispatchEvent(new Event('change')); return true; })()`, &set)
	p.click("#receive")
	p.waitText("#toasts", "Received and deleted")
	p.waitText("#message-body", `"invoice": 0`)
	p.eval(`(() => { const s = document.getElementById('receive-mode'); s.value = 'lock'; return true; })()`, &set)
	for _, outcome := range []string{"complete", "abandon", "defer"} {
		p.click("#receive")
		p.click("#settle-" + outcome)
		p.waitFor(outcome+" done", `!document.getElementById('settle-`+outcome+`')`)
	}
	if c := counts(t, b, "billing-0"); c.Active != 2 || c.Deferred != 1 {
		t.Fatalf("after receive-and-delete, complete, abandon and defer: %+v; want 2 active, 1 deferred", c)
	}

	// Sessions of a session queue.
	p.open("#/entity/carts/sessions")
	p.waitText("table.list", "cart-42")
	p.waitText("table.list", "cart-7")
	p.shot("07-sessions")

	// The namespace, on a laptop and on a phone.
	p.open("#/")
	p.waitText("table.list", "billing-1")
	p.waitFor("a live chart", `document.querySelectorAll('svg.spark polyline').length > 0`)
	p.shot("08-queues")
	p.open("#/entity/billing-2")
	p.waitFor("the chart", `document.querySelectorAll('svg.chart polyline').length > 0`)
	// Messages flowing in show as a rate (the broker keeps statistics).
	for i := range 30 {
		ok(b.Send(bg, "billing-2", &core.Message{Body: []byte(fmt.Sprint(i))}))
	}
	p.waitFor("an incoming rate above zero", `[...document.querySelectorAll('.card')].some(c => c.textContent.endsWith('In') && !c.textContent.startsWith('0/s'))`)
	p.eval(`(() => { const s = document.querySelector('select[aria-label="Page size"]'); s.value = '20'; s.dispatchEvent(new Event('change')); return true; })()`, &set)
	p.waitFor("a page of 20", `document.querySelectorAll('tr[data-seq]').length === 20`)
	p.click("tr[data-seq]")
	p.waitText("#message-body", "invoice")
	p.shot("09-queue")
	p.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)))
	p.open("#/")
	p.waitText("table.list", "billing-1")
	var overflow bool
	p.eval(`document.documentElement.scrollWidth > window.innerWidth + 1`, &overflow)
	if overflow {
		t.Error("on a phone-sized screen the page scrolls sideways; only tables may")
	}
	p.shot("10-phone")
	p.open("#/entity/billing-1")
	p.click("tr[data-seq]")
	p.waitText("#message-body", "invoice")
	p.eval(`document.documentElement.scrollWidth > window.innerWidth + 1`, &overflow)
	if overflow {
		t.Error("on a phone-sized screen a queue's page scrolls sideways; only tables may")
	}
	p.shot("11-phone-message")
}
