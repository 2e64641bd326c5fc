// Connects to 127.0.0.1:CORPUS_PORT (the stand-in for a remote host), says who it is and
// holds the connection for HOLD ms (default: until killed); waits DELAY ms first (a helper
// that phones home once the call that started it has answered). Used by the corpus attacks.
//   node connect.js [NAME] [HOLD] [DELAY]
const net = require('net');
const port = Number(process.env.CORPUS_PORT);
const hold = Number(process.argv[3] || 0);
const delay = Number(process.argv[4] || 0);
setTimeout(() => {
  const sock = net.connect(port, '127.0.0.1', () => {
    sock.write(`${process.argv[2] || 'helper'} ${process.pid}\n`);
  });
  sock.on('error', () => process.exit(0));
  sock.on('data', () => {});
  if (hold > 0) setTimeout(() => { sock.destroy(); process.exit(0); }, hold);
}, delay);
setInterval(() => {}, 1 << 30);
