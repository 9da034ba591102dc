// A full js-libp2p 3 node (TCP, noise, yamux) for libp2pmux's test against a
// go-libp2p host whose muxer is braid (libp2pmux/jsnode_test.go).
//
//   node node.mjs listen          prints "listening MULTIADDR/p2p/PEERID"
//   node node.mjs dial MULTIADDR  prints "connected PEERID to PEERID muxer ID" once connected
//
// It serves /braid-test/echo/1.0.0 (echo until FIN, then FIN) and
// /braid-test/ctl/1.0.0, where the line "open N SIZE" makes it open N echo
// streams at once back to the peer, check SIZE random bytes on each by
// SHA-256, and reply "ok N" or "fail ...". It exits when stdin closes.
import './shim.mjs'
import crypto from 'node:crypto'
import { createLibp2p } from 'libp2p'
import { tcp } from '@libp2p/tcp'
import { noise } from '@chainsafe/libp2p-noise'
import { yamux } from '@chainsafe/libp2p-yamux'
import { multiaddr } from '@multiformats/multiaddr'
import { Reader, write } from './streamio.mjs'

const echoProtocol = '/braid-test/echo/1.0.0'
const ctlProtocol = '/braid-test/ctl/1.0.0'
const maxStreams = 1024 // above the streams a check opens at once

function out (line) { process.stdout.write(line + '\n') }

const [role, addr] = process.argv.slice(2)
const node = await createLibp2p({
  addresses: { listen: role === 'listen' ? ['/ip4/127.0.0.1/tcp/0'] : [] },
  transports: [tcp()],
  connectionEncrypters: [noise()],
  streamMuxers: [yamux()],
  connectionMonitor: { enabled: false }
})
const streamLimits = { maxInboundStreams: maxStreams, maxOutboundStreams: maxStreams }

await node.handle(echoProtocol, async stream => {
  const r = new Reader(stream)
  try {
    for (let c = await r.next(); c != null; c = await r.next()) await write(stream, c)
    await stream.close()
  } catch (err) {
    stream.abort(err)
  }
}, streamLimits)

async function echoCheck (peer, size) {
  const s = await node.dialProtocol(peer, echoProtocol, streamLimits)
  const r = new Reader(s)
  const data = crypto.randomBytes(size)
  const got = r.drain()
  await write(s, data)
  await s.close()
  const { n, hex } = await got
  const want = crypto.createHash('sha256').update(data).digest('hex')
  if (n !== size || hex !== want) throw new Error(`echo of ${size} bytes came back as ${n} bytes, sha ${hex}`)
}

await node.handle(ctlProtocol, async (stream, connection) => {
  const r = new Reader(stream)
  try {
    const [cmd, n, size] = (await r.line()).split(' ')
    if (cmd !== 'open') throw new Error(`unknown command ${cmd}`)
    const results = await Promise.allSettled(Array.from({ length: Number(n) }, () => echoCheck(connection.remotePeer, Number(size))))
    const failed = results.filter(x => x.status === 'rejected')
    await write(stream, Buffer.from(failed.length === 0 ? `ok ${n}\n` : `fail ${failed.length} of ${n}: ${failed[0].reason}\n`))
    await stream.close()
  } catch (err) {
    out(`error ${err.name}: ${err.message}`)
    stream.abort(err)
  }
}, streamLimits)

process.stdin.on('end', async () => { await node.stop(); process.exit(0) })
process.stdin.resume()

if (role === 'listen') {
  out(`listening ${node.getMultiaddrs()[0].toString()}`)
} else if (role === 'dial') {
  const conn = await node.dial(multiaddr(addr))
  out(`connected ${node.peerId.toString()} to ${conn.remotePeer.toString()} muxer ${conn.multiplexer}`)
} else {
  console.error('usage: node node.mjs listen | node node.mjs dial MULTIADDR')
  process.exit(2)
}
