// Node 20 lacks Promise.withResolvers (Node 22 has it); js-libp2p 3 calls it.
if (typeof Promise.withResolvers !== 'function') Promise.withResolvers = function () { let resolve, reject; const promise = new this((res, rej) => { resolve = res; reject = rej }); return { promise, resolve, reject } }
