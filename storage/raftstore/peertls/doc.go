// Package peertls is the identity of a cluster's nodes on their peer
// ports: a cluster certificate authority, the certificates it issues to
// nodes (each names one node id), the files a node keeps them in, and the
// join tokens a new node exchanges for its certificate.
//
// A certificate names its node as the URI "omnibus-node:<id>"; peers check
// that name, not host names, so a node keeps its certificate when it moves.
// Both ends of every peer connection present a certificate issued by a CA
// the other trusts ([Creds.ServerConfig], [Creds.ClientConfig]).
//
// A node's TLS directory (<cluster-dir>/tls) holds:
//
//	ca.pem        the CAs this node trusts (one, two while the CA is rotated)
//	ca-key.pem    the signing CA's key and certificate: every member has it,
//	              so that any member can admit a new one (mode 0600)
//	node.pem      this node's certificate, then its issuer's
//	node-key.pem  its key (mode 0600)
//
// The package does no network I/O: storage/raftstore serves and checks the
// exchange.
package peertls
