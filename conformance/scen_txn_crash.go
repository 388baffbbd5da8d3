package conformance

// A crash between a transaction's operations and its commit loses the
// transaction and nothing else; a crash right after a commit was
// accepted loses none of it. Needs Target.Crash.

func init() {
	register(
		Scenario{Name: "txn-crash-loses-only-the-transaction", Seed: "Overview of transaction processing: a transaction is atomic; AMQP §4.5: an undischarged transaction is rolled back when its controller goes; acknowledged work is durable", Protocol: AMQP,
			Crashes: true, Run: func(t *T) {
				in, out := t.Queue("cf-txn-in"), t.Queue("cf-txn-out")
				t.Send(out, Text("bystander"))
				s := t.startTxnStep(in, in, out, "input")
				s.complete(t)
				if st := s.send(t, "lost"); !st.Accepted {
					t.Fatalf("sending in the transaction: %s", st)
				}
				t.Check("crash before the commit")
				t.must(t.target.Crash(t.ctx), "crashing the endpoint")
				t.expectPeek(out, "bystander") // nothing of the transaction, the plain send kept
				t.expectPeek(in, "input")      // the completion undone (its lock died with the process)

				t.Check("crash after the commit")
				s = t.openTxnStep(in, in, out, "input")
				s.complete(t)
				if st := s.send(t, "kept"); !st.Accepted {
					t.Fatalf("sending in the transaction: %s", st)
				}
				if st := s.discharge(t, false); !st.Accepted {
					t.Fatalf("commit answered %s", st)
				}
				t.must(t.target.Crash(t.ctx), "crashing the endpoint")
				t.expectPeek(out, "bystander", "kept")
				t.expectPeek(in)
			}},
	)
}
