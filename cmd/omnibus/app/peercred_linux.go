package app

import (
	"fmt"
	"net"
	"os"
	"syscall"
)

// checkPeerUser refuses a Unix connection from a user other than this
// process's or root (SO_PEERCRED).
func checkPeerUser(c net.Conn) error {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return fmt.Errorf("not a Unix connection: %T", c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return err
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return err
	}
	if credErr != nil {
		return fmt.Errorf("peer credentials: %w", credErr)
	}
	if cred.Uid != 0 && int(cred.Uid) != os.Getuid() {
		return fmt.Errorf("process %d of user %d is not this omnibus's user (%d) or root", cred.Pid, cred.Uid, os.Getuid())
	}
	return nil
}
