package main

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/pacer-dev/pacer/shaper"
	"github.com/pacer-dev/pacer/stats/control"
)

// captureHandler streams a pcap file of a direction's packets
// (control.CapturePath) for the request's duration, or until the client
// goes; the counts follow in the response's trailers.
func (d *daemon) captureHandler(w http.ResponseWriter, r *http.Request) {
	var req control.CaptureRequest
	if err := decode(r, &req); err != nil {
		reply(w, 0, nil, err)
		return
	}
	l := d.link.Load()
	if l == nil {
		reply(w, 0, nil, &requestError{status: http.StatusServiceUnavailable, err: errors.New("the link is not up yet")})
		return
	}
	if err := checkDirection(req.Direction); err != nil {
		reply(w, 0, nil, err)
		return
	}
	point, err := shaper.ParseCapturePoint(req.Point)
	if err != nil {
		reply(w, 0, nil, badRequest("point: %v", err))
		return
	}
	if req.Snaplen != 0 && (req.Snaplen < 20 || req.Snaplen > shaper.MaxSnaplen) {
		reply(w, 0, nil, badRequest("snaplen: %d is out of range [20, %d]", req.Snaplen, shaper.MaxSnaplen))
		return
	}
	dur, err := time.ParseDuration(req.Duration)
	if err != nil || dur <= 0 || dur > control.MaxCapture {
		reply(w, 0, nil, badRequest("duration: %q: give how long to capture, such as 10s (at most %v)", req.Duration, control.MaxCapture))
		return
	}
	w.Header().Set("Content-Type", "application/vnd.tcpdump.pcap")
	w.Header().Set("Trailer", control.CaptureTrailerPackets+", "+control.CaptureTrailerLost)
	rc := http.NewResponseController(w)
	stop, err := l.Capture(req.Direction, point, req.Snaplen, w, func() { rc.Flush() })
	if err != nil {
		reply(w, 0, nil, &requestError{status: http.StatusConflict, err: err})
		return
	}
	d.log.Info("control: capture started", "direction", req.Direction, "point", point, "snaplen", req.Snaplen, "duration", dur)
	t := time.NewTimer(dur)
	select {
	case <-t.C:
	case <-r.Context().Done():
		t.Stop()
	}
	st, err := stop()
	w.Header().Set(control.CaptureTrailerPackets, strconv.FormatUint(st.Packets, 10))
	w.Header().Set(control.CaptureTrailerLost, strconv.FormatUint(st.Lost, 10))
	d.log.Info("control: capture ended", "direction", req.Direction, "packets", st.Packets, "lost", st.Lost, "err", err)
}
