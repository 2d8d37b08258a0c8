// The image's one entry point: the operator, or with `witness` as the first argument the node witness
// (src/witness), which runs as a DaemonSet from the same image.
if (process.argv[2] === 'witness') await import('./witness/main.js');
else await import('./operator/main.js');
