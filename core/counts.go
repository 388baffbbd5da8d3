package core

// Counts are an entity's runtime message counts, as management reports
// them (CountDetails).
type Counts struct {
	Active     int64 // deliverable or locked
	DeadLetter int64 // in the dead-letter subqueue
	Scheduled  int64
	Deferred   int64
	Transfer   int64 // always 0: forwarding is synchronous here
	Total      int64 // MessageCount: everything stored
	SizeBytes  int64
	// Subscriptions is the number of subscriptions (topics only).
	Subscriptions int
}

// addMessages adds o's message counts and sizes to c (not Subscriptions:
// the parts of one entity each count the same subscriptions).
func (c *Counts) addMessages(o Counts) {
	c.Active += o.Active
	c.DeadLetter += o.DeadLetter
	c.Scheduled += o.Scheduled
	c.Deferred += o.Deferred
	c.Transfer += o.Transfer
	c.Total += o.Total
	c.SizeBytes += o.SizeBytes
}

// Counts returns the runtime counts of a queue, topic or subscription.
// A topic's size is the sum of its subscriptions'.
func (b *Broker) Counts(path string) (Counts, error) {
	if b.routed() {
		be, err := b.route(path)
		if err != nil {
			return Counts{}, err
		}
		return be.Counts(path)
	}
	e, err := b.lookup(ParseAddress(path))
	if err != nil {
		return Counts{}, err
	}
	return e.counts(), nil
}

// counts returns the counts of a queue or subscription (its partitions'
// summed) or a topic.
func (e *entity) counts() Counts {
	var c Counts
	if e.desc.Load().Kind == KindTopic {
		if subs := e.subs.Load(); subs != nil {
			c.Subscriptions = len(*subs)
			for _, s := range *subs {
				c.SizeBytes += s.counts().SizeBytes
			}
		}
		return c
	}
	for _, u := range e.units() {
		c.addMessages(u.q.counts())
	}
	return c
}

func (q *queue) counts() Counts {
	var c Counts
	q.mu.Lock()
	c.Active = q.mu.activeN
	c.Deferred = q.mu.deferredN
	c.Scheduled = int64(len(q.mu.scheduled))
	c.SizeBytes = q.mu.bytes
	q.mu.Unlock()
	q.dead.mu.Lock()
	c.DeadLetter = q.dead.mu.activeN + q.dead.mu.deferredN
	c.SizeBytes += q.dead.mu.bytes
	q.dead.mu.Unlock()
	c.Total = c.Active + c.Deferred + c.Scheduled + c.DeadLetter
	return c
}
