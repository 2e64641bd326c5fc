// The "file watcher" a tool starts in the background: it does nothing, and keeps running
// after the call and after the session.
setInterval(() => {}, 1 << 30);
