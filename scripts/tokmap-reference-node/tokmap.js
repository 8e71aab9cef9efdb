// The compressed-token map by Hugging Face's own implementation (tokenizers' Node binding), as DeepSeek-V4.1's
// CompressedTokenizer builds it; see scripts/tokmap-reference for usage.
'use strict';
const fs = require('fs');
const tk = require('tokenizers');
const { npyInt32 } = require('./npy.js');

// NFKC, NFD, StripAccents, Lowercase by the library; the two regex replacements as the Python reference
// spells them (Replace(Regex), which HF runs with Oniguruma: no '\n' is left for '^'/'$' to see); Strip by the
// library; the sentinel back to a space.
const pre = tk.sequenceNormalizer([tk.nfkcNormalizer(), tk.nfdNormalizer(), tk.stripAccentsNormalizer(),
	tk.lowercase()]);
const strip = tk.stripNormalizer(true, true);
function engramKey(text) {
	let s = pre.normalizeString(text);
	s = s.replace(/[ \t\r\n]+/g, ' ');
	s = s.replace(/^ $/, '\uE000');
	s = strip.normalizeString(s);
	return s.split('\uE000').join(' ');
}

async function tokmap(path, out) {
	const tok = tk.Tokenizer.fromFile(path);
	const n = tok.getVocabSize(true);
	const ids = Array.from({ length: n }, (_, i) => [i]);
	const texts = await tok.decodeBatch(ids, false);
	const keys = new Map();
	const map = new Array(n);
	for (let id = 0; id < n; id++) {
		const text = texts[id];
		let key;
		if (text.includes('\uFFFD')) {
			key = tok.idToToken(id);
		} else {
			const norm = engramKey(text);
			key = norm ? norm : text;
		}
		if (!keys.has(key))
			keys.set(key, keys.size);
		map[id] = keys.get(key);
	}
	fs.writeFileSync(out, npyInt32(map));
	console.log(`${path}: ${n} ids, ${keys.size} compressed ids -> ${out}`);
}

// Every code point through each transform the map uses, one line per one that changes it:
// "<hex code point>\t<nfkc|nfd|nfc|nfkd|sa|lc|st>\t<hex code points of the result, space-separated>".
function codepoints(out) {
	const N = { nfkc: tk.nfkcNormalizer(), nfd: tk.nfdNormalizer(), nfc: tk.nfcNormalizer(),
		nfkd: tk.nfkdNormalizer(), sa: tk.stripAccentsNormalizer(), lc: tk.lowercase(),
		st: tk.stripNormalizer(true, true) };
	const lines = [];
	for (let cp = 0; cp < 0x110000; cp++) {
		if (cp >= 0xD800 && cp < 0xE000)
			continue;
		const c = String.fromCodePoint(cp);
		for (const k of Object.keys(N)) {
			const r = N[k].normalizeString(c);
			if (r !== c)
				lines.push(cp.toString(16) + '\t' + k + '\t' +
					Array.from(r).map((x) => x.codePointAt(0).toString(16)).join(' '));
		}
	}
	fs.writeFileSync(out, lines.join('\n') + '\n');
	console.log(`${lines.length} code point transforms -> ${out}`);
}

// Strings (JSON array) through the Engram key normalizer: for differential checks of the C code.
function keys(inPath, out) {
	const list = JSON.parse(fs.readFileSync(inPath, 'utf8'));
	fs.writeFileSync(out, JSON.stringify(list.map(engramKey)));
}

const [mode, a, b] = process.argv.slice(2);
if (mode === 'map')
	tokmap(a, b).catch((e) => { console.error(`tokmap-reference: ${a}: ${e}`); process.exit(1); });
else if (mode === 'codepoints')
	codepoints(a);
else if (mode === 'keys')
	keys(a, b);
else {
	console.error('usage: tokmap.js map TOKENIZER_JSON OUT.npy | codepoints OUT.txt | keys IN.json OUT.json');
	process.exit(2);
}
