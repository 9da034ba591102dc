package braid

// The scheduler decides which stream writes next (docs/design.md, "The
// writer", rule 5). It holds the ring of streams with queued frames and
// takes their frames into batches by deficit round robin. It is guarded by
// writer.mu and never blocks: the writer calls take with mu held, and the
// streams' calls (push, pushRef, detach, drop) come through the writer's
// send, sendRef and drop, also with mu held.

// maxFreeQueues bounds the send queues a session keeps for reuse.
const maxFreeQueues = 64

// scheduler is the ring of streams with queued frames, in turn order, and
// the queues kept for reuse. Guarded by writer.mu.
type scheduler struct {
	codec      codec
	maxBatch   int // the batch bound; a pass's quanta add up to it
	frameMax   int // the payload of a by-reference write's frames but its last
	loneFrame  int // the same while one stream alone sends (writerate.go); at least frameMax
	frameLimit int // the codec's bound on a data frame's payload; 0 means none
	// What refFrameLen last sized, for the in-flight bound's lone
	// budgets (writer.loneScale, loneBudgets): the payload (0 before
	// any), its stream's ID (an ID, not the stream's send state, so that
	// a finished stream is not kept alive by it), and whether a stream
	// other than the one before sized a frame since takeRefSwitch last
	// looked.
	lastRef     int
	refStream   uint32
	refSwitched bool
	copied      bool // a copied frame was queued or written inline since takeCopied
	// otherCopied: a copied frame of a stream other than refStream was
	// queued or written inline since takeOtherCopied (noteCopied).
	otherCopied bool
	ring        []*streamSend
	ringSpare   []*streamSend // the ring's other buffer, swapped per batch
	freeQueues  []*sendQueue  // empty send queues kept for reuse
	queued      int           // copied stream bytes queued in all streams
	bulkQueued  int           // of queued, the bytes of streams that send bulk by copy (streamSend.bulk)
	smallPushed bool          // a small message was queued since takeSmallPushed (noteWrite)
	smallBeside bool          // small messages came beside bulk by copy within severalQuiet (writer.copyBulkBeside): bulkCopyRoom
	merge       bool          // a small frame may join its stream's last queued one (push): mergeSmallFrames
	sole        soleStream    // which stream has the conn to itself, for its mid-size Writes (alone.go)
}

// newScheduler makes a scheduler for batches of maxBatch bytes. A frame of
// a by-reference write carries at most one batch, within the codec's bound
// (refFrameLen).
func newScheduler(c codec, maxBatch int) scheduler {
	m := c.caps().maxDataFrame
	frameMax := maxBatch
	if m > 0 {
		frameMax = min(maxBatch, m)
	}
	return scheduler{codec: c, maxBatch: maxBatch, frameMax: frameMax, loneFrame: frameMax, frameLimit: m}
}

// refFrameLen is the payload of the next frame of a by-reference write with
// rest bytes left: at most one batch, except that a remainder of less than
// a quarter batch (remainderShare) rides with it, within the codec's bound.
// A Write of 64 KiB plus a 4-byte length prefix is then one frame and one
// batch, not a second, 4-byte frame with a batch, a system call (and, over
// TLS, a record) of its own.
// While one stream alone sends, its frames carry up to loneFrame. The
// size and the stream, id, are kept (lastRef, refStream, refSwitched).
func (sc *scheduler) refFrameLen(id uint32, rest int) int {
	sc.refSwitched = sc.refSwitched || sc.refStream != 0 && sc.refStream != id // 0: none yet (stream 0 is the session's)
	sc.refStream = id
	sc.sole.noteData(id)
	frameMax := sc.frameMax
	if !sc.cutsAtRoom() {
		frameMax = sc.loneFrame
	}
	sc.lastRef = frameMax
	if rest-frameMax < frameMax/remainderShare && (sc.frameLimit == 0 || rest <= sc.frameLimit) {
		sc.lastRef = rest
	}
	return sc.lastRef
}

// minRefCut is the least payload of a by-reference frame cut at the
// in-flight bound's room (take): below it the frame waits for the next
// marker's pong instead, as a frame and a system call per few bytes of
// room would cost more than the wait.
const minRefCut = 8 * 1024

// remainderShare: a by-reference write's last frame may carry up to
// 1/remainderShare of a batch beyond it (refFrameLen); a quarter keeps a
// frame within 1.25 batches, so the batch bound still bounds what a small
// frame waits behind.
const remainderShare = 4

// takeRefSwitch reports whether frames of more than one stream were sized
// by reference since it last looked (streams that write in turn, each
// alone in the ring at its turn, as at one P), and clears it.
func (sc *scheduler) takeRefSwitch() bool {
	switched := sc.refSwitched
	sc.refSwitched = false
	return switched
}

// takeCopied tells whether a copied (small) stream frame was queued
// (push) or written inline in the writer's stead (writer.inlineLocked,
// for send and sendSmall alike) since the last call, and clears it: the
// lone budgets' quiet (writer.loneScale) restarts on one while several
// streams send.
func (sc *scheduler) takeCopied() bool {
	copied := sc.copied
	sc.copied = false
	return copied
}

// noteCopied records a copied (small) frame of stream id, queued (push)
// or written inline (writer.inlineLocked): for takeCopied, and for
// takeOtherCopied when id is not the stream that last sent by reference.
func (sc *scheduler) noteCopied(id uint32) {
	sc.copied = true
	sc.sole.noteData(id)
	if id != sc.refStream {
		sc.otherCopied = true
	}
}

// takeOtherCopied tells whether a copied frame of a stream other than the
// one that last sent by reference was queued or written inline since the
// last call, and clears it: the quiet of a lone stream's cork with more
// than one P (writer.bulkOnlyLocked). A lone stream's own small frames (a
// length prefix written on its own) do not count.
func (sc *scheduler) takeOtherCopied() bool {
	other := sc.otherCopied
	sc.otherCopied = false
	return other
}

// cutsAtRoom tells whether take cuts a by-reference frame at the
// in-flight bound's room: while more than one stream is in the ring, so
// that the bound leaves the small frames of the others their slack and
// what they wait behind is the budget, not the budget and a batch. A lone
// stream's frames go whole (a small frame that comes later has copyRoom);
// cut, one-stream bulk over TCP measured 5 % less.
func (sc *scheduler) cutsAtRoom() bool { return len(sc.ring) > 1 }

// refStreams counts the streams in the ring with a by-reference write
// queued (bulk), up to most: it stops looking there. At most one look per
// stream in the ring, per batch.
func (sc *scheduler) refStreams(most int) int {
	n := 0
	for _, s := range sc.ring {
		if s.q != nil && s.q.hasRef {
			if n++; n >= most {
				break
			}
		}
	}
	return n
}

// refFits tells whether take would take a by-reference frame with room
// bytes left in the in-flight budget (negative: no bound): any room for a
// lone stream's whole frame, a cut's worth while frames are cut at the
// room. The writer parks on less rather than make empty batches (at
// GOMAXPROCS 1 such a loop starved the read loop of the pong it waited
// for).
func (sc *scheduler) refFits(room int) bool {
	if room < 0 || room > 0 && !sc.cutsAtRoom() {
		return true
	}
	return room >= minRefCut+headerSize
}

// copyRoom is how far beyond the in-flight budget copied (small) frames
// may go: copySlack, and while a lone stream's by-reference frames are
// taken whole (cutsAtRoom) the batch by which its first frame may cross
// the budget, so that a small frame never waits for a marker's pong.
func (sc *scheduler) copyRoom() int {
	if sc.cutsAtRoom() {
		return copySlack
	}
	return copySlack + sc.loneFrame + headerSize
}

// bulkCopyRoom is how far beyond the in-flight budget the copied frames
// of streams that send bulk by copy (streamSend.bulk) may go: none while
// small messages come beside them (smallBeside), so that copySlack stays
// for those, as by-reference frames beside them leave it; elsewhere as
// far as any copied frame (copyRoom): bulk streams with no small message
// beside them have only each other to wait for (10 streams of 4 KiB
// Writes, the slack left unused at two P: x0.87-0.90).
func (sc *scheduler) bulkCopyRoom() int {
	if sc.smallBeside {
		return 0
	}
	return sc.copyRoom()
}

// busy reports whether any stream has frames queued.
func (sc *scheduler) busy() bool { return len(sc.ring) > 0 }

// streamLimit is how many copied bytes one stream may have queued: two
// equal shares of a batch, so that a stream of small writes has its share
// ready for this batch and the next while it waits to run again.
func (sc *scheduler) streamLimit() int {
	return max(minStreamQueue, 2*sc.maxBatch/max(1, len(sc.ring)))
}

// hasRoom tells whether s may queue another copied frame: its queue (none
// yet is empty) holds less than its limit.
func (sc *scheduler) hasRoom(s *streamSend) bool {
	return s.q == nil || s.q.pending() < sc.streamLimit()
}

// resumeLevel is what a stream's queue must drop to before its waiting
// Write resumes: half its limit, so that the Write queues half a limit's
// worth before it waits again, not one frame per wake-up (the writer
// still has the other half to take meanwhile). 100 streams of 64 B
// messages measured x1.06 and x1.04 at GOMAXPROCS 1 and 2 against
// resuming below the limit.
func (sc *scheduler) resumeLevel() int { return sc.streamLimit() / 2 }

// add gives s a send queue and a place at the end of the ring if it has
// none: streams hold one only while they have frames queued, so an idle
// stream costs a pointer. The caller queues a frame before it lets go of
// writer.mu.
func (sc *scheduler) add(s *streamSend) {
	if s.q != nil {
		return
	}
	if n := len(sc.freeQueues); n > 0 {
		s.q = sc.freeQueues[n-1]
		sc.freeQueues[n-1] = nil
		sc.freeQueues = sc.freeQueues[:n-1]
	} else {
		s.q = new(sendQueue)
	}
	sc.ring = append(sc.ring, s)
}

// push queues a copied frame on s, in order with its other frames: as
// more payload of its last queued frame when it can (sendQueue.extend),
// up to mergeLimit.
func (sc *scheduler) push(s *streamSend, h header, payload []byte) {
	sc.noteCopied(h.streamID)
	sc.add(s)
	if sc.merge && s.q.extend(sc.codec, h, payload, sc.mergeLimit()) {
		sc.count(s, len(payload))
		return
	}
	// The frame's real size, not headerSize and the payload: take
	// subtracts what it copies, and an mplex header is shorter, so
	// counting headerSize made queued grow by the difference with every
	// frame, for the session's life (CoalesceDelay's wait, which looks at
	// queued, then stopped: TestMplexQueuedBytesBalance).
	sc.count(s, s.q.push(sc.codec, h, payload))
}

// count adds n copied bytes queued by s (taken or dropped: negative) to
// queued, and to bulkQueued if s sends bulk by copy.
func (sc *scheduler) count(s *streamSend, n int) {
	sc.queued += n
	if s.bulk {
		sc.bulkQueued += n
	}
}

// markBulk marks s as sending bulk by copy (a copied Write of more than
// maxSmallPayload waits for room in its queue), its bytes queued so far
// with it.
func (sc *scheduler) markBulk(s *streamSend) {
	if s.bulk {
		return
	}
	s.bulk = true
	if s.q != nil {
		sc.bulkQueued += s.q.pending()
	}
}

// noteWrite records that a copied frame of a Write of write bytes (0: not
// a Write's, a FIN) of s was queued: a small message beside bulk by copy,
// a Write of at most maxSmallPayload of a stream that does not send bulk
// by copy while bulk by copy is queued, for takeSmallPushed. The Write's
// length, not the frame's: a 4 KiB Write that credit cut into a short
// frame is no message; not a bulk stream's own small Writes (a length
// prefix before each 4 KiB message); and not one before any bulk was
// queued (the byte that opens a stream that then sends alone, noted
// until the writer next sized its budget, started a quiet once the
// stream's bulk came: one stream's 4 KiB Writes x0.80-0.84 at two P).
func (sc *scheduler) noteWrite(s *streamSend, write int) {
	if write > 0 && write <= maxSmallPayload && !s.bulk && sc.bulkQueued > 0 {
		sc.smallPushed = true
	}
}

// takeSmallPushed tells whether a small message (noteWrite) was queued
// since the last call (beside bulk sent by copy: writer.copyBulkBeside),
// and clears it.
func (sc *scheduler) takeSmallPushed() bool {
	small := sc.smallPushed
	sc.smallPushed = false
	return small
}

// smallQueued tells whether copied frames of a stream that is not bulk
// are queued: frames that may use copySlack.
func (sc *scheduler) smallQueued() bool { return sc.queued > sc.bulkQueued }

// mergeSmallFrames: small copied writes queued behind others join their
// stream's last queued frame (sendQueue.extend), with coalescing on. Each
// frame the peer reads costs it a header, a lookup and a lock of its
// stream: 100 streams of 64 B messages at GOMAXPROCS 1 measured x1.40 (10
// of 10 pairs). With two Ps the merge first measured x0.88 (2 of 10):
// the streams' writes, three lock pairs each, contended for writer.mu.
// Since a small Write takes writer.mu alone (writer.sendSmall), it
// measures x1.13 there (10 of 10).

// quantum is the bytes each stream in the ring may send per pass of take.
func (sc *scheduler) quantum() int { return max(sc.maxBatch/max(len(sc.ring), 1), 1) }

// mergeLimit bounds the payload of a frame that small writes join (push):
// within a quantum, so that the frame still goes in one turn of its
// stream, and within maxSmallPayload, what the peer's read loop admits and
// buffers under one lock of the stream.
func (sc *scheduler) mergeLimit() int { return min(maxSmallPayload, sc.quantum()-headerSize) }

// pushRef queues a by-reference write of payload on s, h being its first
// frame's header; s waits for it (pendingRefs) until every frame is taken
// and written.
func (sc *scheduler) pushRef(s *streamSend, h header, payload []byte) {
	sc.add(s)
	s.q.ref, s.q.hasRef = pendingRef{h: h, rest: payload}, true
	s.pendingRefs++
}

// freeQueue takes the empty send queue from s, which leaves the ring (the
// caller drops it from ring).
func (sc *scheduler) freeQueue(s *streamSend) {
	q := s.q
	s.q = nil
	*q = sendQueue{ends: q.ends[:0]}
	if len(sc.freeQueues) < maxFreeQueues {
		sc.freeQueues = append(sc.freeQueues, q)
	}
}

// detach turns what the writer has not taken of s's by-reference write
// into copied frames of at most one batch each (sendRef's deadline).
func (sc *scheduler) detach(s *streamSend) {
	if s.q == nil || !s.q.hasRef {
		return
	}
	r := &s.q.ref
	for len(r.rest) > 0 {
		n := min(len(r.rest), sc.frameMax)
		h := r.h
		h.length = uint32(n)
		hdr, hn := sc.codec.encodeData(h)
		s.q.pushEncoded(hdr[:hn], r.rest[:n])
		sc.count(s, hn+n)
		r.rest = r.rest[n:]
		r.h.flags = 0
	}
	s.q.ref, s.q.hasRef = pendingRef{}, false
	s.pendingRefs--
}

// drop discards what s has queued: take never reaches its frames again,
// and a by-reference write waiting for them ends with ErrStreamReset. s
// leaves the ring at its next turn.
func (sc *scheduler) drop(s *streamSend) {
	q := s.q
	if q == nil {
		return
	}
	sc.count(s, -q.pending())
	q.discard()
	s.abandonRef(ErrStreamReset)
	s.notify()
}

// failAll releases every stream waiting on its queue with err and empties
// the ring (the writer failed or closed).
func (sc *scheduler) failAll(err error) {
	for _, s := range sc.ring {
		s.abandonRef(err)
		s.q.discard()
		s.q.waiting = false
		sc.freeQueue(s)
		s.notify()
	}
	clear(sc.ring)
	sc.ring = nil
	sc.queued, sc.bulkQueued = 0, 0
}

// take moves queued stream frames into b by deficit round robin: a pass
// gives every stream in the ring a quantum (an equal share of the batch)
// of credit, and a stream sends frames while its credit covers them, so
// that over a few batches every busy stream sends the same bytes whatever
// its write sizes; a stream whose queue empties loses its credit and
// leaves the ring. One pass per batch, more only while nobody could send
// yet (large frames wait for credit), so that a large frame waits for its
// share instead of filling the batch. Streams not reached go first next
// time.
//
// Copied frames are appended to b.data (their ends to b.ends); by-reference
// frames to b.refs, at most one beyond the batch bound. b.size is what the
// batch holds already (its control frames) and grows with what is taken;
// limit (at most the batch bound) is where the batch stops, lower while
// the in-flight bound holds data back, and refLimit (at most limit) where
// by-reference frames stop: small copied frames get a little more room
// than bulk (copyRoom). While the bound holds data back and several
// streams send, a by-reference frame is cut at refLimit (cutsAtRoom,
// refFits).
func (sc *scheduler) take(b *batch, refLimit, bulkLimit, limit int) {
	data, ends, refs, size := b.data, b.ends, b.refs, b.size
	cut := refLimit < limit && sc.cutsAtRoom() // see cutsAtRoom
	for len(sc.ring) > 0 && size < limit {
		quantum := sc.quantum()
		progress, short, full := false, false, false
		served := 0
		for _, s := range sc.ring {
			if size >= limit {
				break
			}
			served++
			q := s.q
			credit := quantum
			if q.resume {
				q.resume, credit = false, 0 // the last batch ended inside its turn: go on with its credit
			}
			q.deficit += credit
			for q.endHead < len(q.ends) {
				end := int(q.ends[q.endHead])
				n := end - q.head
				if n > q.deficit {
					short = true
					break
				}
				if size > 0 && size+n > limit {
					full = true
					break
				}
				if s.bulk && (size >= bulkLimit || size > 0 && size+n > bulkLimit) {
					// Bulk by copy stops at the budget, so that
					// copySlack stays for small frames; what is
					// left of the pass's credit is not kept.
					q.deficit -= min(credit, q.deficit)
					break
				}
				data = append(data, q.buf[q.head:end]...)
				ends = append(ends, len(data))
				q.head, q.endHead = end, q.endHead+1
				q.deficit -= n
				size += n
				sc.count(s, -n)
				progress = true
			}
			for q.endHead == len(q.ends) && q.hasRef {
				p := sc.refFrameLen(q.ref.h.streamID, len(q.ref.rest))
				if cut && size+headerSize+p > refLimit {
					// Cut at the bound's room, so that the bound
					// leaves copySlack for small frames (a whole
					// frame would take it: the ping beside bulk
					// would wait for the next marker's pong).
					p = refLimit - size - headerSize
					if p < minRefCut {
						break
					}
				}
				n := headerSize + p
				if n > q.deficit {
					short = true
					break
				}
				if !(len(refs) == 0 && size < refLimit || size+n <= refLimit) {
					break
				}
				refs = sc.takeRef(refs, s, p)
				q.deficit -= n
				size += n
				progress = true
			}
			if q.empty() {
				q.deficit = 0
			}
			q.release()
			if q.waiting && q.pending() <= sc.resumeLevel() {
				q.waiting = false
				s.notify()
			}
			if full {
				// Stopped by the batch's end, not by its credit: its turn
				// goes on first in the next batch, with the credit it has
				// left and no new quantum (deficit round robin across
				// batches), so that neither it nor the streams behind it
				// are starved by where batches happen to end.
				q.resume = true
				served--
				break
			}
		}
		// Streams not reached keep their turn; served ones go behind
		// them, and empty ones leave the ring.
		next := sc.ringSpare[:0]
		next = append(next, sc.ring[served:]...)
		for _, s := range sc.ring[:served] {
			if s.q.empty() && !s.q.waiting {
				sc.freeQueue(s)
			} else {
				next = append(next, s)
			}
		}
		clear(sc.ring)
		sc.ring, sc.ringSpare = next, sc.ring[:0]
		if progress || !short {
			break // one pass taken, or what is left doesn't fit
		}
	}
	b.data, b.ends, b.refs, b.size = data, ends, refs, size
}

// takeRef appends the next frame of s's by-reference write, of n payload
// bytes, to refs. s waits for that frame (writer.complete finishes it);
// the write's own count goes once it is all taken.
func (sc *scheduler) takeRef(refs []refFrame, s *streamSend, n int) []refFrame {
	q := s.q
	h := q.ref.h
	h.length = uint32(n)
	hdr, hn := sc.codec.encodeData(h)
	refs = append(refs, refFrame{hdr: hdr, hdrLen: uint8(hn), payload: q.ref.rest[:n], owner: s})
	s.pendingRefs++
	q.ref.rest = q.ref.rest[n:]
	q.ref.h.flags = 0 // flags (an ACK) ride on the first frame only
	if len(q.ref.rest) == 0 {
		q.ref, q.hasRef = pendingRef{}, false
		s.pendingRefs--
	}
	return refs
}
