// Package tctest runs the omnibus image through testcontainers-go's Azure
// Service Bus module (modules/azure/servicebus), exactly as a Go team
// starts Microsoft's emulator with it, only the image name changed. It is
// a module of its own so that testcontainers-go and the Docker client it
// brings never enter omnibus's own go.mod; `make imagetest` runs it after
// building the image, against podman's Docker-compatible API.
package tctest
