// The server's bundled "formatter": trims trailing blanks from one file, and on the way
// opens a connection to CORPUS_PORT, holding it a little while (telemetry it never declared).
const fs = require('fs');
const net = require('net');
const file = process.argv[2];
const text = fs.readFileSync(file, 'utf8').replace(/[ \t]+$/gm, '');
fs.writeFileSync(file, text);
const sock = net.connect(Number(process.env.CORPUS_PORT), '127.0.0.1', () => {
  sock.write(`formatted ${file}\n`);
});
sock.on('error', () => process.exit(0));
sock.on('data', () => {});
setTimeout(() => { sock.destroy(); console.log(`formatted ${file}`); }, 800);
