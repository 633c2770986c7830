package control

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// CapturePath streams a pcap file of a direction's packets
// (CaptureRequest): the response's body is the file, as it is written;
// its counts come in the trailers CaptureTrailerPackets and
// CaptureTrailerLost.
const CapturePath = "/v1/capture"

// The trailers of a capture's response.
const (
	CaptureTrailerPackets = "Pacer-Capture-Packets"
	CaptureTrailerLost    = "Pacer-Capture-Lost"
)

// MaxCapture bounds how long one capture runs.
const MaxCapture = time.Hour

// CaptureRequest captures direction Direction's packets ("egress" or
// "ingress") for Duration ("10s"), at Point: "departure" (as pacer lets
// them go: shaped and impaired; the default) or "arrival" (as it reads
// them, before any drop), keeping the first Snaplen bytes of each (0:
// 256).
type CaptureRequest struct {
	Direction string `json:"direction"`
	Point     string `json:"point,omitempty"`
	Snaplen   int    `json:"snaplen,omitempty"`
	Duration  string `json:"duration"`
}

// CaptureResult is what a capture wrote: Packets in the file, and Lost,
// packets it could not copy (its writer fell behind the traffic).
type CaptureResult struct {
	Packets, Lost uint64
}

// Capture runs a capture (CaptureRequest) and copies the pcap file to w
// as the daemon writes it; it returns once the capture ends (its duration,
// or ctx done). The client's timeout does not bound it: ctx and the
// duration do.
func (c *Client) Capture(ctx context.Context, req CaptureRequest, w io.Writer) (CaptureResult, error) {
	var res CaptureResult
	b, err := json.Marshal(req)
	if err != nil {
		return res, fmt.Errorf("encode request: %w", err)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://pacerd"+CapturePath, bytes.NewReader(b))
	if err != nil {
		return res, fmt.Errorf("control request: %w", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	hc := &http.Client{Transport: c.http.Transport}
	resp, err := hc.Do(hr)
	if err != nil {
		return res, c.dialError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return res, apiError(resp.StatusCode, data)
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return res, fmt.Errorf("capture: %w", err)
	}
	res.Packets, _ = strconv.ParseUint(resp.Trailer.Get(CaptureTrailerPackets), 10, 64)
	res.Lost, _ = strconv.ParseUint(resp.Trailer.Get(CaptureTrailerLost), 10, 64)
	if resp.Trailer.Get(CaptureTrailerPackets) == "" {
		return res, fmt.Errorf("capture: the daemon's answer ended early (no counts)")
	}
	return res, nil
}
