package amqpserver

import "strings"

// SessionHolder describes who holds the lock on session id of the entity
// at path of the named namespace ("" for the default one) through this
// server: "AMQP connection from 127.0.0.1:50312", or "" when no receiver
// link of this server holds it. Tools (the web console) show it beside
// the core's view of the session.
func (s *Server) SessionHolder(namespace, path, sessionID string) string {
	ns := s.reg.Default()
	if namespace != "" {
		var err error
		if ns, err = s.reg.Get(namespace); err != nil {
			return ""
		}
	}
	s.locks.mu.Lock()
	h := s.locks.m[sessionKey{ns, strings.ToLower(path), sessionID}]
	s.locks.mu.Unlock()
	if h.c == nil {
		return ""
	}
	return "AMQP connection from " + h.c.nc.RemoteAddr().String()
}
