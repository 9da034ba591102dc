// Stream helpers shared by peer.mjs and node.mjs: a buffering reader and a
// write that waits for drain.
import crypto from 'node:crypto'

// Reader buffers a stream's data from the moment the stream exists, so no
// chunk, FIN or reset is missed while a command is parsed.
export class Reader {
  constructor (stream) {
    this.chunks = []
    this.eof = false
    this.err = null
    this.wake = null
    stream.addEventListener('message', e => { this.chunks.push(e.data instanceof Uint8Array ? e.data : e.data.subarray()); this.notify() })
    stream.addEventListener('remoteCloseWrite', () => { this.eof = true; this.notify() })
    stream.addEventListener('close', e => { if (e.error != null) this.err = e.error; this.eof = true; this.notify() })
    if (stream.remoteWriteStatus === 'closed') {
      // the FIN came before this reader: end after the buffered data,
      // which the 'message' listener above dispatches in a microtask
      queueMicrotask(() => { this.eof = true; this.notify() })
    }
  }

  notify () { const w = this.wake; this.wake = null; if (w) w() }

  // next returns the next chunk, null at a clean end; it throws the
  // stream's error (a reset) once the buffered data is consumed.
  async next () {
    for (;;) {
      if (this.chunks.length > 0) return this.chunks.shift()
      if (this.err != null) throw this.err
      if (this.eof) return null
      await new Promise(resolve => { this.wake = resolve })
    }
  }

  async line () {
    let s = ''
    for (;;) {
      const c = await this.next()
      if (c == null) throw new Error('stream ended before a command line')
      const i = c.indexOf(10)
      if (i >= 0) {
        s += Buffer.from(c.subarray(0, i)).toString()
        if (i + 1 < c.length) this.chunks.unshift(c.subarray(i + 1))
        return s
      }
      s += Buffer.from(c).toString()
    }
  }

  // drain reads to the end; returns the byte count and SHA-256 (hex).
  async drain () {
    const h = crypto.createHash('sha256')
    let n = 0
    for (let c = await this.next(); c != null; c = await this.next()) { h.update(c); n += c.length }
    return { n, hex: h.digest('hex') }
  }
}

function closedPromise (stream) {
  return new Promise((resolve, reject) => stream.addEventListener('close', e => reject(e.error ?? new Error('stream closed'))))
}

export async function write (stream, buf) {
  if (!stream.send(buf)) {
    const closed = closedPromise(stream)
    closed.catch(() => {})
    await Promise.race([stream.onDrain(), closed])
  }
}

