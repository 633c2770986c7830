//go:build linux

package vhost

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/pacer-dev/pacer/tun"
	"golang.org/x/sys/unix"
)

// Read implements tun.Queue.Read: it takes the packets the kernel has put
// in the rx ring (copying each out of the shared buffer into bufs), hands
// the buffers back, and kicks the ring only if the kernel had run out of
// buffers. With none there it waits on the rx call eventfd, on the
// netpoller, until the kernel signals or the read deadline passes (an
// error wrapping os.ErrDeadlineExceeded).
func (v *Queue) Read(bufs [][]byte, pkts []tun.Packet, offset int) (int, error) {
	if offset < tun.Headroom {
		return 0, fmt.Errorf("vhost %s: queue %d: read: offset %d below Headroom %d", v.name, v.index, offset, tun.Headroom)
	}
	count := min(len(bufs), len(pkts))
	if count == 0 {
		return 0, nil
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	for {
		if v.closed.Load() {
			return 0, v.opErr("read", os.ErrClosed)
		}
		if v.rx.pending() > 0 {
			n, err := v.readBatch(bufs[:count], pkts, offset)
			if n > 0 || err != nil {
				return n, err
			}
			continue // only empty frames
		}
		v.waits.Add(1)
		if err := v.callRC[ringRX].Read(v.waitRXFn); err != nil {
			return 0, v.opErr("read", err)
		}
	}
}

// readBatch takes up to len(bufs) used rx entries.
func (v *Queue) readBatch(bufs [][]byte, pkts []tun.Packet, offset int) (n int, err error) {
	r := &v.rx
	for avail := r.pending(); avail > 0 && n < len(bufs); avail-- {
		id, l := r.take()
		frame := r.buf(id)[:min(int(l), r.bufSize)]
		size := len(frame) - v.vnetLen
		switch {
		case size <= 0:
			// nothing but a header: nothing to pass on
		case offset+size > len(bufs[n]):
			err = v.opErr("read", io.ErrShortBuffer)
		default:
			copy(bufs[n][offset-v.vnetLen:], frame)
			g, _ := tun.DecodeVirtioNetHdr(frame)
			pkts[n] = tun.NewPacket(bufs[n][offset:offset+size], g)
			n++
		}
		r.push(id) // the descriptor still points at the whole buffer
		if err != nil {
			break
		}
	}
	r.publish()
	if r.needsKick() {
		v.kickRing(ringRX)
	}
	return n, err
}

// waitRX is the rx call eventfd's RawConn.Read callback: it turns the
// kernel's signals on, then looks at the used ring again (the kernel may
// have added to it before it saw them on), and asks to park only if it is
// still empty. A signal that came is drained; the next one wakes us.
func (v *Queue) waitRX(fd uintptr) bool { return v.waitRing(&v.rx, fd) }

func (v *Queue) waitTX(fd uintptr) bool { return v.waitRing(&v.tx, fd) }

func (v *Queue) waitRing(r *vring, fd uintptr) bool {
	if r.availFlags != 0 {
		r.availFlags = 0
		r.publish()
	}
	if _, err := unix.Read(int(fd), v.drain[:]); err == nil {
		v.callReads.Add(1)
	}
	if r.pending() == 0 && !v.closed.Load() {
		return false
	}
	r.availFlags = availFlagNoInterrupt
	r.publish()
	return true
}

// kickRing tells the kernel of new buffers on ring i.
func (v *Queue) kickRing(i int) {
	one := [8]byte{1}
	unix.Write(v.kick[i], one[:])
	v.kicks.Add(1)
}

// Write implements tun.Queue.Write: it copies each packet, with its
// virtio_net_hdr, into a free tx buffer, puts them all on the tx ring and
// kicks it once, unless the kernel is still at work on the ring. Buffers
// come back as the kernel reports them sent; with none free, Write waits
// for the kernel on the tx call eventfd.
func (v *Queue) Write(bufs [][]byte, pkts []tun.Packet, offset int) (int, error) {
	if offset < tun.Headroom {
		return 0, fmt.Errorf("vhost %s: queue %d: write: offset %d below Headroom %d", v.name, v.index, offset, tun.Headroom)
	}
	count := min(len(bufs), len(pkts))
	if count == 0 {
		return 0, nil
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	if v.closed.Load() {
		return 0, v.opErr("write", os.ErrClosed)
	}
	r := &v.tx
	v.reclaim()
	written := 0
	var first error
	for i := range count {
		p := &pkts[i]
		if p.Size <= 0 || offset+p.Size > len(bufs[i]) || v.vnetLen+p.Size > r.bufSize {
			if first == nil {
				first = fmt.Errorf("packet %d: %w", i, io.ErrShortBuffer)
			}
			continue
		}
		for len(v.txFree) == 0 {
			v.flushTX()
			v.waits.Add(1)
			if err := v.callRC[ringTX].Read(v.waitTXFn); err != nil {
				return written, v.opErr("write", err)
			}
			if v.closed.Load() {
				return written, v.opErr("write", os.ErrClosed)
			}
			v.reclaim()
		}
		id := v.txFree[len(v.txFree)-1]
		v.txFree = v.txFree[:len(v.txFree)-1]
		b := r.buf(id)
		tun.EncodeVirtioNetHdr(b, p.GSO)
		copy(b[v.vnetLen:], bufs[i][offset:offset+p.Size])
		r.setDesc(id, v.vnetLen+p.Size, 0)
		r.push(id)
		written++
	}
	v.flushTX()
	if first != nil {
		return written, v.opErr("write", first)
	}
	return written, nil
}

// flushTX publishes the pushed tx descriptors and kicks the ring if the
// kernel waits for a kick.
func (v *Queue) flushTX() {
	v.tx.publish()
	if v.tx.needsKick() {
		v.kickRing(ringTX)
	}
}

// reclaim frees the tx buffers the kernel has sent.
func (v *Queue) reclaim() {
	for avail := v.tx.pending(); avail > 0; avail-- {
		id, _ := v.tx.take()
		v.txFree = append(v.txFree, id)
	}
}

func (v *Queue) opErr(op string, err error) error {
	if v.closed.Load() && !errors.Is(err, os.ErrClosed) {
		err = fmt.Errorf("%w (%w)", os.ErrClosed, err)
	}
	return fmt.Errorf("vhost %s: queue %d: %s: %w", v.name, v.index, op, err)
}
