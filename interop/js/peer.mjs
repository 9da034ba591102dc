// A js-libp2p muxer (@chainsafe/libp2p-yamux or @libp2p/mplex) on a raw TCP
// socket, driven by braid's interop tests (interop/extpeer_test.go).
//
//   node peer.mjs yamux|mplex listen        prints "listening HOST:PORT"
//   node peer.mjs yamux|mplex dial HOST:PORT
//
// Each stream the Go side opens starts with one command line; the commands
// and their replies are described in interop/extpeer_test.go. Lines on
// stdout are events for the test ("report TAG ..."); the process exits when
// its connection closes.
import './shim.mjs'
import net from 'node:net'
import crypto from 'node:crypto'
import { AbstractMultiaddrConnection, ipPortToMultiaddr } from '@libp2p/utils'
import { logger } from '@libp2p/logger'
import { yamux } from '@chainsafe/libp2p-yamux'
import { mplex } from '@libp2p/mplex'
import { Reader, write } from './streamio.mjs'

const chunkSize = 64 * 1024 // bytes per send of a bulk transfer
const maxStreams = 4096 // well above the 300 streams a test opens at once
// @libp2p/mplex 12 drops the connection when the peer opens more than
// disconnectThreshold streams in a second (default 5), or sends that many
// frames for unknown streams: the checks open 300 at once.
const mplexNewStreamsPerSecond = 100_000

function out (line) { process.stdout.write(line + '\n') }

// SocketConn is a MultiaddrConnection over a node:net socket, as
// @libp2p/tcp's (which it does not export).
class SocketConn extends AbstractMultiaddrConnection {
  constructor (socket, direction) {
    super({
      log: logger('braid-peer:conn'),
      direction,
      remoteAddr: ipPortToMultiaddr(socket.remoteAddress, socket.remotePort),
      inactivityTimeout: 0
    })
    this.socket = socket
    socket.on('data', buf => this.onData(buf))
    socket.on('error', err => this.abort(err))
    socket.once('end', () => this.onTransportClosed())
    socket.once('close', hadError => hadError ? this.abort(new Error('TCP transmission error')) : this.onTransportClosed())
    socket.on('drain', () => this.safeDispatchEvent('drain'))
  }

  sendData (data) {
    let sentBytes = 0
    let canSendMore = true
    for (const buf of data) {
      sentBytes += buf.byteLength
      canSendMore = this.socket.write(buf)
      if (!canSendMore) break
    }
    return { sentBytes, canSendMore }
  }

  async sendClose () {
    if (this.socket.destroyed) return
    await new Promise(resolve => { this.socket.once('close', resolve); this.socket.destroySoon() })
  }

  sendReset () { this.socket.resetAndDestroy() }
  sendPause () { this.socket.pause() }
  sendResume () { this.socket.resume() }
}

// pattern returns n bytes of the transfer pattern from offset off: byte i
// of a transfer is i mod 251 (a prime, so a lost or repeated chunk of any
// power-of-two size shows).
function pattern (off, n) {
  const b = Buffer.allocUnsafe(n)
  for (let i = 0; i < n; i++) b[i] = (off + i) % 251
  return b
}

async function sendPattern (stream, total) {
  for (let off = 0; off < total; off += chunkSize) await write(stream, pattern(off, Math.min(chunkSize, total - off)))
}

const [kind, role, addr] = process.argv.slice(2)
const factory = kind === 'yamux'
  ? yamux({ enableKeepAlive: false, maxInboundStreams: maxStreams, maxOutboundStreams: maxStreams, maxEarlyStreams: maxStreams })()
  : mplex({ disconnectThreshold: mplexNewStreamsPerSecond })()

function serve (socket, direction) {
  socket.setNoDelay(true)
  const conn = new SocketConn(socket, direction)
  const muxer = factory.createStreamMuxer(conn)
  const ctx = { socket, conn, muxer, watchers: new Set() }
  conn.addEventListener('close', async () => {
    for (const tag of ctx.watchers) out(await goAwayReport(ctx, tag))
    // the go-away read from the remote, if any (yamux; mplex has none)
    out(ctx.muxer.remoteGoAway === undefined ? 'closed, no go-away read' : `closed goaway ${ctx.muxer.remoteGoAway}`)
    process.exit(0)
  })
  muxer.addEventListener('stream', e => {
    const stream = e.detail
    const r = new Reader(stream)
    command(ctx, stream, r).catch(err => { out(`error ${err.name}: ${err.message}`); stream.abort(err) })
  })
}

// goAwayReport tells why the muxer no longer opens streams: "refused goaway
// CODE" only when the remote's go-away frame was read (the yamux muxer's
// handleGoAway sets remoteGoAway to its code) and a new stream is then
// refused; the muxer's end for any other reason (a frame that does not
// decode, the connection's end) is "ended ...".
async function goAwayReport (ctx, tag) {
  const code = ctx.muxer.remoteGoAway
  if (code === undefined) return `report ${tag} ended muxer ${ctx.muxer.status}, no go-away read`
  try {
    const s = await ctx.muxer.createStream()
    s.abort(new Error('opened after a go-away'))
    return `report ${tag} opened a stream after goaway ${code}`
  } catch (err) {
    return `report ${tag} refused goaway ${code}`
  }
}

async function command (ctx, stream, r) {
  const [cmd, ...args] = (await r.line()).split(' ')
  switch (cmd) {
    case 'echo': // copy until FIN, then FIN
      for (let c = await r.next(); c != null; c = await r.next()) await write(stream, c)
      await stream.close()
      return
    case 'send': // send N pattern bytes, then FIN
      await sendPattern(stream, Number(args[0]))
      await stream.close()
      return
    case 'recv': { // read to FIN, reply "N SHA256HEX", FIN
      const { n, hex } = await r.drain()
      await write(stream, Buffer.from(`${n} ${hex}\n`))
      await stream.close()
      return
    }
    case 'finfirst': { // TAG N: send N pattern bytes and FIN, then read to FIN and report
      await sendPattern(stream, Number(args[1]))
      await stream.close()
      const { n, hex } = await r.drain()
      out(`report ${args[0]} ${n} ${hex}`)
      return
    }
    case 'waitreset': // TAG: reply "ready", then report how the stream ended
      await write(stream, Buffer.from('ready\n'))
      try {
        await r.drain()
        out(`report ${args[0]} eof`)
      } catch (err) {
        out(err.name === 'StreamResetError' ? `report ${args[0]} reset` : `report ${args[0]} error ${err.name}: ${err.message}`)
      }
      return
    case 'reset': // N: send N pattern bytes, then reset
      await sendPattern(stream, Number(args[0]))
      stream.abort(new Error('reset by command'))
      return
    case 'cut': { // N fin|rst: send N pattern bytes, then end the TCP connection under the stream
      await sendPattern(stream, Number(args[0]))
      await r.line() // the go-ahead, which also proves the bytes left
      const how = args[1]
      ctx.socket.write(Buffer.alloc(0), () => how === 'rst' ? ctx.socket.resetAndDestroy() : ctx.socket.destroy())
      return
    }
    case 'goaway': // close the muxer (go-away "normal"), then the connection
      await ctx.muxer.close()
      await ctx.conn.close()
      return
    case 'watchgoaway': { // TAG: reply "ready", then report once the muxer is no longer open
      ctx.watchers.add(args[0])
      await write(stream, Buffer.from('ready\n'))
      for (;;) {
        if (!ctx.watchers.has(args[0])) return // reported at the connection's close
        if (ctx.muxer.remoteGoAway !== undefined || ctx.muxer.status !== 'open') {
          ctx.watchers.delete(args[0])
          out(await goAwayReport(ctx, args[0]))
          return
        }
        await new Promise(resolve => setTimeout(resolve, 5))
      }
    }
    case 'ping': { // N: ping the Go side N times, reply "ok" or why not
      if (typeof ctx.muxer.ping !== 'function') {
        await write(stream, Buffer.from('unsupported\n'))
      } else {
        for (let i = 0; i < Number(args[0]); i++) await ctx.muxer.ping()
        await write(stream, Buffer.from('ok\n'))
      }
      await stream.close()
      return
    }
    case 'open': { // N SIZE: open N streams at once, echo-check SIZE random bytes on each, reply "ok N" or "fail ..."
      const n = Number(args[0])
      const size = Number(args[1])
      const streams = await Promise.all(Array.from({ length: n }, () => ctx.muxer.createStream()))
      const results = await Promise.allSettled(streams.map(async s => {
        const sr = new Reader(s)
        const data = crypto.randomBytes(size)
        const got = sr.drain()
        await write(s, data)
        await s.close()
        const { n: m, hex } = await got
        const want = crypto.createHash('sha256').update(data).digest('hex')
        if (m !== size || hex !== want) throw new Error(`echo of ${size} bytes came back as ${m} bytes, sha ${hex}`)
      }))
      const failed = results.filter(x => x.status === 'rejected')
      await write(stream, Buffer.from(failed.length === 0 ? `ok ${n}\n` : `fail ${failed.length} of ${n}: ${failed[0].reason}\n`))
      await stream.close()
      return
    }
    default:
      throw new Error(`unknown command ${cmd}`)
  }
}

if (role === 'listen') {
  const server = net.createServer(socket => { server.close(); serve(socket, 'inbound') })
  server.listen(0, '127.0.0.1', () => out(`listening 127.0.0.1:${server.address().port}`))
} else if (role === 'dial') {
  const [host, port] = addr.split(':')
  const socket = net.connect({ host, port: Number(port) }, () => serve(socket, 'outbound'))
  socket.on('error', err => { out(`error dial: ${err.message}`); process.exit(1) })
} else {
  console.error('usage: node peer.mjs yamux|mplex listen|dial HOST:PORT')
  process.exit(2)
}
