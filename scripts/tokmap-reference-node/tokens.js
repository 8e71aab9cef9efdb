// Text to a token stream for fixtures/tokens (see scripts/tokens-from-text): the text on stdin is cut into chunks
// of CHUNK characters (code points); each chunk is tokenized alone by Hugging Face's tokenizers (no special tokens)
// and starts with the BOS id 0; the ids are written as an int32 .npy, cut to MAX tokens when MAX > 0.
'use strict';
const fs = require('fs');
const tk = require('tokenizers');
const { npyInt32 } = require('./npy.js');

async function main() {
	const [tokenizer, out, chunkArg, maxArg] = process.argv.slice(2);
	const chunk = Number(chunkArg), max = Number(maxArg);
	if (!out || !(chunk > 0) || !(max >= 0))
		throw new Error('usage: tokens.js TOKENIZER_JSON OUT.npy CHUNK_CHARS MAX_TOKENS < TEXT');
	const tok = tk.Tokenizer.fromFile(tokenizer);
	const chars = Array.from(fs.readFileSync(0, 'utf8'));
	const ids = [];
	let chunks = 0;
	for (let at = 0; at < chars.length && (max === 0 || ids.length < max); at += chunk, chunks++) {
		const enc = await tok.encode(chars.slice(at, at + chunk).join(''), null, { addSpecialTokens: false });
		ids.push(0, ...enc.getIds());
	}
	if (max > 0 && ids.length > max)
		ids.length = max;
	fs.writeFileSync(out, npyInt32(ids));
	console.log(`${chars.length} characters, ${chunks} chunks used, ${ids.length} tokens -> ${out}`);
}
main().catch((e) => { console.error(`tokens.js: ${e.message}`); process.exit(1); });
