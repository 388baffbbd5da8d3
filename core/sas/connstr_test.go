package sas

import (
	"errors"
	"testing"
)

func TestParseConnectionString(t *testing.T) {
	emulator := ConnectionString{
		Endpoint:               "sb://localhost",
		Host:                   "localhost",
		SharedAccessKeyName:    "RootManageSharedAccessKey",
		SharedAccessKey:        "SAS_KEY_VALUE",
		UseDevelopmentEmulator: true,
	}
	tests := []struct {
		in   string
		want ConnectionString
	}{
		{"Endpoint=sb://localhost;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;", emulator},
		{"Endpoint=sb://localhost;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true", emulator},
		{" endpoint = sb://localhost ; sharedaccesskeyname=RootManageSharedAccessKey;SHAREDACCESSKEY=SAS_KEY_VALUE ;UseDevelopmentEmulator=True;;", emulator},
		{"Endpoint=sb://localhost;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=TRUE;TransportType=Amqp", emulator},
		{
			"Endpoint=sb://localhost:5300/;SharedAccessKeyName=k;SharedAccessKey=abc+/def==;EntityPath=q1",
			ConnectionString{Endpoint: "sb://localhost:5300/", Host: "localhost:5300", SharedAccessKeyName: "k", SharedAccessKey: "abc+/def==", EntityPath: "q1"},
		},
		{
			"Endpoint=sb://ns.servicebus.windows.net/;SharedAccessSignature=SharedAccessSignature sr=ns.servicebus.windows.net&sig=a%3D&se=1&skn=k",
			ConnectionString{Endpoint: "sb://ns.servicebus.windows.net/", Host: "ns.servicebus.windows.net", SharedAccessSignature: "SharedAccessSignature sr=ns.servicebus.windows.net&sig=a%3D&se=1&skn=k"},
		},
		{"Endpoint=sb://h;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=false", ConnectionString{Endpoint: "sb://h", Host: "h", SharedAccessKeyName: "k", SharedAccessKey: "v"}},
		{"Endpoint=amqp://h;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=0", ConnectionString{Endpoint: "amqp://h", Host: "h", SharedAccessKeyName: "k", SharedAccessKey: "v"}},
	}
	for _, tt := range tests {
		got, err := ParseConnectionString(tt.in)
		if err != nil {
			t.Errorf("ParseConnectionString(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("ParseConnectionString(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
		back, err := ParseConnectionString(got.String())
		if err != nil || back != got {
			t.Errorf("round trip of %q via %q = %+v, %v", tt.in, got.String(), back, err)
		}
	}
}

func TestParseConnectionStringErrors(t *testing.T) {
	bad := []string{
		"",
		";;",
		"SharedAccessKeyName=k;SharedAccessKey=v",
		"Endpoint=localhost;SharedAccessKeyName=k;SharedAccessKey=v",
		"Endpoint=sb://;SharedAccessKeyName=k;SharedAccessKey=v",
		"Endpoint=sb://h;SharedAccessKey=v",
		"Endpoint=sb://h;SharedAccessKeyName=k",
		"Endpoint=sb://h;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=yes",
		"Endpoint=https://h;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true",
		"Endpoint=sb://h;Endpoint=sb://g;SharedAccessKeyName=k;SharedAccessKey=v",
		"Endpoint=sb://h;garbage;SharedAccessKeyName=k;SharedAccessKey=v",
	}
	for _, s := range bad {
		if cs, err := ParseConnectionString(s); !errors.Is(err, ErrInvalidConnectionString) {
			t.Errorf("ParseConnectionString(%q) = %+v, %v; want ErrInvalidConnectionString", s, cs, err)
		}
	}
}
