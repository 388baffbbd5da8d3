//go:build unix

package amqpserver

import "syscall"

// setNOFILE lowers the process's soft limit of open descriptors to n.
func setNOFILE(n uint64) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	lim.Cur = n
	return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
}
