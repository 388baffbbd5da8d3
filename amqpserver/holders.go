package amqpserver

import "strings"

// SessionHolder describes who holds the lock on session id of the entity
// at path through this server: "AMQP connection from 127.0.0.1:50312",
// or "" when no receiver link of this server holds it. Tools (the web
// console) show it beside the core's view of the session.
func (s *Server) SessionHolder(path, sessionID string) string {
	s.locks.mu.Lock()
	h := s.locks.m[sessionKey{strings.ToLower(path), sessionID}]
	s.locks.mu.Unlock()
	if h.c == nil {
		return ""
	}
	return "AMQP connection from " + h.c.nc.RemoteAddr().String()
}
