// Files the API answers as JSON (a device bundle, a certificate) saved as one download:
// a POSIX tar (ustar) that keeps each file's mode (the key 0600), so the device's files
// come out as `edgesync devices bundle DIR` writes them: `tar -xpf NAME.tar -C /etc/edgesync`.

const BLOCK = 512;
const encoder = new TextEncoder();

function field(header, offset, length, text) {
  const bytes = encoder.encode(text);
  if (bytes.length > length) throw new Error(`tar: ${text} does not fit in ${length} bytes`);
  header.set(bytes, offset);
}

function octal(n, width) { return n.toString(8).padStart(width - 1, "0") + "\0"; }

function header(name, mode, size, mtime) {
  const h = new Uint8Array(BLOCK);
  field(h, 0, 100, name);
  field(h, 100, 8, octal(mode, 8));
  field(h, 108, 8, octal(0, 8)); // uid: whoever extracts owns the files
  field(h, 116, 8, octal(0, 8));
  field(h, 124, 12, octal(size, 12));
  field(h, 136, 12, octal(mtime, 12));
  field(h, 148, 8, "        "); // the checksum counts itself as spaces
  field(h, 156, 1, "0");
  field(h, 257, 6, "ustar\0");
  field(h, 263, 2, "00");
  const sum = h.reduce((a, b) => a + b, 0);
  field(h, 148, 8, sum.toString(8).padStart(6, "0") + "\0 ");
  return h;
}

// files: [{name, mode: "0600", content: string}] → a Blob of the tar archive.
export function tarOf(files) {
  const mtime = Math.floor(Date.now() / 1000);
  const parts = [];
  for (const f of files) {
    const body = encoder.encode(f.content);
    parts.push(header(f.name, parseInt(f.mode || "0644", 8), body.length, mtime), body);
    const pad = (BLOCK - (body.length % BLOCK)) % BLOCK;
    if (pad) parts.push(new Uint8Array(pad));
  }
  parts.push(new Uint8Array(2 * BLOCK)); // the end: two empty blocks
  return new Blob(parts, { type: "application/x-tar" });
}

// Hand a Blob to the browser as a download named `name`.
export function save(name, blob) {
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  a.hidden = true;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}
