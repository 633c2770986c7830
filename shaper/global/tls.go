package global

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// TLSOptions are the files and name for TLS connections to Redis. A nil
// *TLSOptions means plain TCP; an empty one means TLS with the system's
// roots.
type TLSOptions struct {
	// CAFile holds the PEM certificates that may sign the server's
	// certificate ("" for the system's roots).
	CAFile string
	// CertFile and KeyFile are the client's certificate and key (both or
	// neither).
	CertFile, KeyFile string
	// ServerName is the name to verify the server's certificate against
	// ("" for the host part of the address).
	ServerName string
}

// config builds the tls.Config (nil for nil options).
func (o *TLSOptions) config() (*tls.Config, error) {
	if o == nil {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: o.ServerName}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("redis tls: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("redis tls: %s holds no PEM certificate", o.CAFile)
		}
	}
	if o.CertFile != "" || o.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("redis tls: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}
