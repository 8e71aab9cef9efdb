/* tokenizer.json read: token strings by id, added tokens as Hugging Face tokenizers 0.23 numbers them (and
 * normalizes those marked "normalized"), and the decoder's steps (ByteLevel, Replace, ByteFallback, Fuse,
 * Strip, Metaspace, BPEDecoder, WordPiece, Sequence) flattened for tokenizer_decode.c, which applies them. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "internal.h"
#include "file.h"
#include "jsonerr.h"
#include "sha256.h"
#include "strtab.h"
#include "tokenizer.h"
#include "tokenizer_steps.h"

struct load {
	struct eg_tokenizer *tk;
	const char *path;
	struct step *steps;
	size_t n_steps, cap_steps;
};

static int bad(const struct load *l, const char *fmt, ...) EG_PRINTF(2, 3);

/* ENGRAM_EPARSE with "tokenizer '<path>': <message>". */
static int bad(const struct load *l, const char *fmt, ...)
{
	char msg[320];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return eg_fail(ENGRAM_EPARSE, "tokenizer '%s': %s", l->path, msg);
}

static int pool_add(struct eg_tokenizer *tk, const char *s, size_t n, struct span *sp)
{
	size_t off = tk->pool.n;
	int err;

	if (n > UINT32_MAX)
		return -E2BIG;
	if ((err = eg_text_append(&tk->pool, s, n)) < 0)
		return err;
	sp->off = off;
	sp->len = (uint32_t)n;
	return 0;
}

/* ---- reading the file ---- */

static int read_file(const char *path, char **buf, size_t *size)
{
	int err = eg_read_whole(path, "tokenizer", EG_TOKENIZER_MAX_BYTES, buf, size);

	if (!err && *size == 0) {
		free(*buf);
		*buf = NULL;
		err = eg_fail(ENGRAM_EPARSE, "tokenizer '%s' is empty", path);
	}
	return err;
}

/* ---- JSON accessors ---- */

static int get_str(const struct load *l, const json_t *obj, const char *key, const char *where, const char **s,
		   size_t *n)
{
	const json_t *v = json_object_get(obj, key);

	if (!json_is_string(v))
		return bad(l, "%s: '%s' %s", where, key, v ? "is not a string" : "is missing");
	*s = json_string_value(v);
	*n = json_string_length(v);
	return 0;
}

/* A boolean field; missing ones take def when def >= 0. */
static int get_bool(const struct load *l, const json_t *obj, const char *key, const char *where, int def, int *out)
{
	const json_t *v = json_object_get(obj, key);

	if (!v && def >= 0) {
		*out = def;
		return 0;
	}
	if (!json_is_boolean(v))
		return bad(l, "%s: '%s' %s", where, key, v ? "is not true or false" : "is missing");
	*out = json_is_true(v);
	return 0;
}

static int get_uint(const struct load *l, const json_t *obj, const char *key, const char *where, uint64_t *out)
{
	const json_t *v = json_object_get(obj, key);

	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return bad(l, "%s: '%s' %s", where, key, v ? "is not an integer >= 0" : "is missing");
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

/* A string of exactly one character (Rust's char). */
static int get_char(const struct load *l, const json_t *obj, const char *key, const char *where, uint32_t *out)
{
	const char *s;
	size_t n;
	int err;

	if ((err = get_str(l, obj, key, where, &s, &n)) < 0)
		return err;
	int32_t c = 0;
	if (!n || eg_utf8_decode(s, &c) != n)
		return bad(l, "%s: '%s' is not one character", where, key);
	*out = (uint32_t)c;
	return 0;
}

static const char *type_of(const json_t *obj)
{
	return json_string_value(json_object_get(obj, "type"));
}

static int push_step(struct load *l, struct step s)
{
	if (l->n_steps == EG_TOKENIZER_MAX_STEPS)
		return bad(l, "the decoder or normalizer has more than %u steps (Sequences included)",
			   EG_TOKENIZER_MAX_STEPS);
	if (l->n_steps == l->cap_steps) {
		size_t cap = l->cap_steps ? l->cap_steps * 2 : 8;
		struct step *p = realloc(l->steps, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		l->steps = p;
		l->cap_steps = cap;
	}
	l->steps[l->n_steps++] = s;
	return 0;
}

/* Replace's pattern: {"String": "..."} (a literal); {"Regex": ...} is not supported. */
static int get_pattern(const struct load *l, const json_t *obj, const char *where, struct step *s)
{
	const json_t *p = json_object_get(obj, "pattern");
	int err;

	if (json_is_object(p) && json_object_get(p, "Regex"))
		return bad(l, "%s: Replace with a Regex pattern is not supported (only String patterns)", where);
	if (!json_is_object(p) || !json_is_string(json_object_get(p, "String")))
		return bad(l, "%s: Replace has no 'pattern': {\"String\": ...}", where);
	s->a = json_string_value(json_object_get(p, "String"));
	s->an = json_string_length(json_object_get(p, "String"));
	if (!s->an)
		return bad(l, "%s: Replace has an empty pattern", where);
	if ((err = get_str(l, obj, "content", where, &s->b, &s->bn)) < 0)
		return err;
	return 0;
}

/* One step of a decoder or normalizer that is not a Sequence (obj has a 'type'), pushed onto l's steps. */
typedef int (*parse_step_fn)(struct load *l, const json_t *obj, const char *type);

/* A decoder or normalizer (what), Sequences (whose list is the array list_key, "decoders") flattened in order
 * into l's steps, each other step parsed by one. */
static int parse_steps(struct load *l, const json_t *obj, const char *what, const char *list_key,
		       parse_step_fn one, unsigned depth)
{
	const char *type = type_of(obj);
	int err;

	if (depth > 16)
		return bad(l, "%s Sequences nest more than 16 deep", what);
	if (!json_is_object(obj) || !type)
		return bad(l, "a %s is not an object with a 'type'", what);
	if (strcmp(type, "Sequence"))
		return one(l, obj, type);
	const json_t *list = json_object_get(obj, list_key);
	size_t i;
	const json_t *e;
	if (!json_is_array(list))
		return bad(l, "%s Sequence has no '%s' array", what, list_key);
	json_array_foreach(list, i, e)
		if ((err = parse_steps(l, e, what, list_key, one, depth + 1)) < 0)
			return err;
	return 0;
}

/* ---- the decoder ---- */

static int decoder_step(struct load *l, const json_t *d, const char *type)
{
	struct step s = { 0 };
	int err;

	if (!strcmp(type, "ByteLevel")) {
		s.kind.dec = DEC_BYTE_LEVEL;
	} else if (!strcmp(type, "ByteFallback")) {
		s.kind.dec = DEC_BYTE_FALLBACK;
	} else if (!strcmp(type, "Fuse")) {
		s.kind.dec = DEC_FUSE;
	} else if (!strcmp(type, "Replace")) {
		s.kind.dec = DEC_REPLACE;
		if ((err = get_pattern(l, d, "decoder Replace", &s)) < 0)
			return err;
	} else if (!strcmp(type, "Strip")) {
		s.kind.dec = DEC_STRIP;
		if ((err = get_char(l, d, "content", "decoder Strip", &s.ch)) < 0 ||
		    (err = get_uint(l, d, "start", "decoder Strip", &s.start)) < 0 ||
		    (err = get_uint(l, d, "stop", "decoder Strip", &s.stop)) < 0)
			return err;
	} else if (!strcmp(type, "Metaspace")) {
		const json_t *ps = json_object_get(d, "prepend_scheme");
		const char *scheme = ps ? json_string_value(ps) : "always";
		int aps;
		s.kind.dec = DEC_METASPACE;
		if ((err = get_char(l, d, "replacement", "decoder Metaspace", &s.ch)) < 0)
			return err;
		if (!scheme || (strcmp(scheme, "always") && strcmp(scheme, "first") && strcmp(scheme, "never")))
			return bad(l, "decoder Metaspace: 'prepend_scheme' is not \"always\", \"first\" or \"never\"");
		if ((err = get_bool(l, d, "add_prefix_space", "decoder Metaspace", 1, &aps)) < 0)
			return err;
		if (!aps && strcmp(scheme, "never"))
			return bad(l, "decoder Metaspace: add_prefix_space false does not match prepend_scheme '%s'", scheme);
		s.flag = !strcmp(scheme, "never");
	} else if (!strcmp(type, "BPEDecoder")) {
		s.kind.dec = DEC_BPE_SUFFIX;
		s.a = "</w>";
		s.an = 4;
		if (json_object_get(d, "suffix") && (err = get_str(l, d, "suffix", "decoder BPEDecoder", &s.a, &s.an)) < 0)
			return err;
	} else if (!strcmp(type, "WordPiece")) {
		s.kind.dec = DEC_WORDPIECE;
		if ((err = get_bool(l, d, "cleanup", "decoder WordPiece", 1, &s.flag)) < 0)
			return err;
	} else {
		return bad(l, "decoder type '%s' is not supported (supported: ByteLevel, Replace, ByteFallback, Fuse, "
			      "Strip, Metaspace, BPEDecoder, WordPiece, Sequence)", type);
	}
	return push_step(l, s);
}

/* Copy the decoder's strings out of the JSON tree, which is freed after loading. */
static int keep_decoder(struct load *l)
{
	struct eg_tokenizer *tk = l->tk;
	size_t total = 0, off = 0;

	for (size_t i = 0; i < l->n_steps; i++)
		total += l->steps[i].an + l->steps[i].bn;
	tk->dec_bytes = malloc(total ? total : 1);
	tk->dec = malloc((l->n_steps ? l->n_steps : 1) * sizeof(*tk->dec));
	if (!tk->dec_bytes || !tk->dec)
		return -ENOMEM;
	for (size_t i = 0; i < l->n_steps; i++) {
		struct step s = l->steps[i];
		if (s.an)
			memcpy(tk->dec_bytes + off, s.a, s.an);
		s.a = tk->dec_bytes + off;
		off += s.an;
		if (s.bn)
			memcpy(tk->dec_bytes + off, s.b, s.bn);
		s.b = tk->dec_bytes + off;
		off += s.bn;
		tk->dec[i] = s;
	}
	tk->n_dec = l->n_steps;
	l->n_steps = 0;
	return 0;
}

/* ---- the normalizer, for added tokens marked "normalized" ---- */

static int normalizer_step(struct load *l, const json_t *n, const char *type)
{
	struct step s = { 0 };
	int err;

	if (!strcmp(type, "NFC") || !strcmp(type, "NFD") || !strcmp(type, "NFKC") || !strcmp(type, "NFKD")) {
		s.kind.norm = NORM_FORM;
		s.flag = !strcmp(type, "NFC") ? EG_NFC : !strcmp(type, "NFD") ? EG_NFD : !strcmp(type, "NFKC") ? EG_NFKC
													: EG_NFKD;
	} else if (!strcmp(type, "StripAccents")) {
		s.kind.norm = NORM_STRIP_ACCENTS;
	} else if (!strcmp(type, "Lowercase")) {
		s.kind.norm = NORM_LOWERCASE;
	} else if (!strcmp(type, "Strip")) {
		s.kind.norm = NORM_STRIP;
		if ((err = get_bool(l, n, "strip_left", "normalizer Strip", -1, &s.left)) < 0 ||
		    (err = get_bool(l, n, "strip_right", "normalizer Strip", -1, &s.right)) < 0)
			return err;
	} else if (!strcmp(type, "Replace")) {
		s.kind.norm = NORM_REPLACE;
		if ((err = get_pattern(l, n, "normalizer Replace", &s)) < 0)
			return err;
	} else if (!strcmp(type, "Prepend")) {
		s.kind.norm = NORM_PREPEND;
		if ((err = get_str(l, n, "prepend", "normalizer Prepend", &s.a, &s.an)) < 0)
			return err;
	} else {
		return bad(l, "normalizer type '%s' is not supported, and an added token marked \"normalized\" needs it "
			      "(supported: NFC, NFD, NFKC, NFKD, StripAccents, Lowercase, Strip, Replace, Prepend, "
			      "Sequence)", type);
	}
	return push_step(l, s);
}

/* A normalizer step's name in messages, by enum norm_kind. */
static const char *const norm_names[] = { "NFC/NFD/NFKC/NFKD", "StripAccents", "Lowercase", "Strip", "Replace",
					  "Prepend" };

/* The normalizer over added token i (t holds its content), within text_max of it. */
static int normalize(const struct load *l, size_t i_token, struct eg_text *t)
{
	const size_t max = eg_text_max(t->n);
	int err = 0;

	for (size_t i = 0; i < l->n_steps && !err; i++) {
		const struct step *s = &l->steps[i];
		switch (s->kind.norm) {
		case NORM_FORM: err = eg_u_normalize(t, (enum eg_nf)s->flag); break;
		case NORM_STRIP_ACCENTS: err = eg_u_strip_accents(t); break;
		case NORM_LOWERCASE: err = eg_u_lowercase(t); break;
		case NORM_STRIP: err = eg_u_strip(t, s->left, s->right); break;
		case NORM_REPLACE: err = eg_u_replace(t, s->a, s->an, s->b, s->bn, max); break;
		case NORM_PREPEND:
			/* NormalizedString::prepend: only a non-empty string */
			if (t->n && s->an > max - t->n) {
				err = -E2BIG;
			} else if (t->n) {
				struct eg_text p = { 0 };
				if (!(err = eg_text_set(&p, s->a, s->an)) && !(err = eg_text_append(&p, t->s, t->n)))
					err = eg_text_set(t, p.s, p.n);
				eg_text_free(&p);
			}
			break;
		}
		if (err == -E2BIG || (!err && t->n > max))
			return bad(l, "normalizer step %zu (%s) makes added token %zu longer than %zu bytes, the most a "
				      "token may be normalized to", i + 1, norm_names[s->kind.norm], i_token, max);
	}
	return err;
}

/* ---- vocabulary ---- */

static int add_model_vocab(struct load *l, const json_t *model, uint64_t *n_model, struct eg_strtab *vocab)
{
	struct eg_tokenizer *tk = l->tk;
	const json_t *v = json_object_get(model, "vocab");
	const char *type = type_of(model);
	size_t n;
	int err;

	if (type && strcmp(type, "BPE") && strcmp(type, "WordPiece") && strcmp(type, "WordLevel") &&
	    strcmp(type, "Unigram"))
		return bad(l, "model type '%s' is not supported (supported: BPE, Unigram, WordPiece, WordLevel)", type);
	if (!v)
		return bad(l, "the model has no 'vocab'");
	if (type && !strcmp(type, "Unigram") ? !json_is_array(v) : !json_is_object(v) && (type || !json_is_array(v)))
		return bad(l, "the model's 'vocab' is not %s", type && !strcmp(type, "Unigram") ? "an array of "
			   "[piece, score]" : "an object {token: id}");
	n = json_is_array(v) ? json_array_size(v) : json_object_size(v);
	if (n == 0)
		return bad(l, "the model's vocabulary is empty");
	if (n > INT32_MAX)
		return bad(l, "the model's vocabulary has %zu tokens, more than int32 ids allow", n);
	tk->ids = malloc(n * sizeof(*tk->ids));
	if (!tk->ids)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		tk->ids[i].len = UINT32_MAX; /* not seen yet */
	if (json_is_array(v)) {
		size_t i;
		const json_t *e;
		json_array_foreach(v, i, e) {
			const json_t *piece = json_array_get(e, 0);
			uint32_t prev;
			if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_string(piece) ||
			    !json_is_number(json_array_get(e, 1)))
				return bad(l, "vocabulary entry %zu is not [piece, score]", i);
			const char *s = json_string_value(piece);
			size_t sn = json_string_length(piece);
			if ((err = eg_strtab_add(vocab, s, sn, (uint32_t)i, &prev)) < 0)
				return err;
			if (!err)
				return bad(l, "vocabulary piece %zu is the same string as piece %u", i, prev);
			if ((err = pool_add(tk, s, sn, &tk->ids[i])) < 0)
				return err;
		}
	} else {
		const char *key;
		size_t kn;
		const json_t *id;
		json_object_keylen_foreach((json_t *)v, key, kn, id) {
			json_int_t x = json_is_integer(id) ? json_integer_value(id) : -1;
			uint32_t prev;
			if (!json_is_integer(id) || x < 0 || (uint64_t)x >= n)
				return bad(l, "vocabulary id of token \"%.40s\" is %s: ids must be 0 .. %zu with no holes", key,
					   json_is_integer(id) ? "out of range" : "not an integer", n - 1);
			if (tk->ids[x].len != UINT32_MAX)
				return bad(l, "vocabulary id %lld is given to two tokens", (long long)x);
			if ((err = pool_add(tk, key, kn, &tk->ids[x])) < 0 ||
			    (err = eg_strtab_add(vocab, key, kn, (uint32_t)x, &prev)) < 0)
				return err;
		}
	}
	*n_model = n;
	return 0;
}

struct added_props {
	uint8_t present, bits; /* single_word, lstrip, rstrip, normalized, special */
};

/* added_tokens, as AddedVocabulary::add_tokens numbers them (tokenizers/src/tokenizer/added_vocabulary.rs). */
static int add_added_tokens(struct load *l, const json_t *root, uint64_t n_model, const struct eg_strtab *vocab)
{
	struct eg_tokenizer *tk = l->tk;
	const json_t *list = json_object_get(root, "added_tokens"), *e;
	struct eg_strtab added = { 0 };
	struct added_props *props = NULL;
	uint8_t *cached = NULL;
	uint64_t next = n_model;
	size_t i, n;
	int err = 0, norm_parsed = 0;
	struct eg_text t = { 0 };
	const json_t *normalizer = json_object_get(root, "normalizer");
	struct span *ids;

	if (!list || json_is_null(list))
		return 0;
	if (!json_is_array(list))
		return bad(l, "'added_tokens' is not an array");
	n = json_array_size(list);
	if (n > INT32_MAX - n_model)
		return bad(l, "%zu added tokens are too many", n);
	ids = realloc(tk->ids, (n_model + n) * sizeof(*ids));
	props = calloc(n_model + n, sizeof(*props));
	cached = calloc(n_model + n, 1);
	if (!ids || !props || !cached) {
		if (ids)
			tk->ids = ids;
		err = -ENOMEM;
		goto out;
	}
	tk->ids = ids;
	json_array_foreach(list, i, e) {
		const char *content;
		size_t cn;
		uint64_t declared;
		uint32_t id;
		int f[5];
		char where[48];
		static const char *const names[5] = { "single_word", "lstrip", "rstrip", "normalized", "special" };

		snprintf(where, sizeof(where), "added token %zu", i);
		if (!json_is_object(e)) {
			err = bad(l, "%s is not an object", where);
			goto out;
		}
		if ((err = get_str(l, e, "content", where, &content, &cn)) < 0 ||
		    (err = get_uint(l, e, "id", where, &declared)) < 0)
			goto out;
		for (int k = 0; k < 5; k++)
			if ((err = get_bool(l, e, names[k], where, k < 3 ? 0 : -1, &f[k])) < 0)
				goto out;
		uint8_t bits = (uint8_t)(f[0] | f[1] << 1 | f[2] << 2 | f[3] << 3 | f[4] << 4);
		if (!cn)
			continue; /* the library ignores empty added tokens */
		if (eg_strtab_get(&added, content, cn, &id)) {
			if (props[id].bits == bits && declared == id)
				continue;
		} else if (!eg_strtab_get(vocab, content, cn, &id)) {
			id = (uint32_t)next++;
		}
		if (declared != id) {
			err = bad(l, "added token \"%.40s\" declares id %llu, but Hugging Face tokenizers gives it id %u "
				     "(a string of the vocabulary keeps its id; new ones are numbered from %llu in file order)",
				  content, (unsigned long long)declared, id, (unsigned long long)n_model);
			goto out;
		}
		uint32_t unused;
		if ((err = eg_strtab_add(&added, content, cn, id, &unused)) < 0)
			goto out;
		props[id] = (struct added_props){ 1, bits };
		if (f[3] && normalizer && !json_is_null(normalizer)) {
			if (!norm_parsed) {
				if ((err = parse_steps(l, normalizer, "normalizer", "normalizers", normalizer_step, 0)) < 0)
					goto out;
				norm_parsed = 1;
			}
			if ((err = eg_text_set(&t, content, cn)) < 0 || (err = normalize(l, i, &t)) < 0)
				goto out;
			if (t.n != cn || memcmp(t.s, content, cn)) {
				if ((err = pool_add(tk, t.s, t.n, &tk->ids[id])) < 0)
					goto out;
				cached[id] = 1; /* the library's normalized_cache: kept even if re-added unnormalized */
				continue;
			}
		}
		if (!cached[id] && (err = pool_add(tk, content, cn, &tk->ids[id])) < 0)
			goto out;
	}
	tk->n_ids = next;
	err = 0;
out:
	l->n_steps = 0;
	eg_text_free(&t);
	eg_strtab_free(&added);
	free(props);
	free(cached);
	return err;
}

int eg_tokenizer_load(struct eg_tokenizer **out, const char *path, uint8_t digest[32])
{
	struct load l = { .path = path };
	struct eg_tokenizer *tk;
	struct eg_strtab vocab = { 0 };
	json_error_t jerr;
	json_t *root = NULL;
	char *buf = NULL;
	size_t size = 0;
	uint64_t n_model = 0;
	int err;

	*out = NULL;
	if ((err = read_file(path, &buf, &size)) < 0)
		return err;
	if (digest)
		eg_sha256(buf, size, digest);
	root = json_loadb(buf, size, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
	free(buf);
	if (!root)
		return eg_fail(eg_json_error(&jerr), "tokenizer '%s': invalid JSON at line %d: %s", path, jerr.line,
			       jerr.text);
	tk = calloc(1, sizeof(*tk));
	if (!tk || !(tk->path = strdup(path))) {
		err = -ENOMEM;
		goto out;
	}
	l.tk = tk;
	if (!json_is_object(root)) {
		err = bad(&l, "the top level is not a JSON object");
		goto out;
	}
	const json_t *model = json_object_get(root, "model");
	if (!json_is_object(model)) {
		err = bad(&l, model ? "'model' is not an object" : "there is no 'model'");
		goto out;
	}
	if ((err = add_model_vocab(&l, model, &n_model, &vocab)) < 0)
		goto out;
	tk->n_ids = n_model;
	if ((err = add_added_tokens(&l, root, n_model, &vocab)) < 0)
		goto out;
	const json_t *dec = json_object_get(root, "decoder");
	tk->has_decoder = dec && !json_is_null(dec);
	if (tk->has_decoder && (err = parse_steps(&l, dec, "decoder", "decoders", decoder_step, 0)) < 0)
		goto out;
	err = keep_decoder(&l);
out:
	if (err == -ENOMEM || err == -E2BIG)
		err = eg_fail(err, "tokenizer '%s': %s", path, err == -E2BIG ? "too large" : "out of memory");
	json_decref(root);
	eg_strtab_free(&vocab);
	free(l.steps);
	if (err < 0)
		eg_tokenizer_free(tk);
	else
		*out = tk;
	return err;
}

void eg_tokenizer_free(struct eg_tokenizer *tk)
{
	if (!tk)
		return;
	free(tk->path);
	eg_text_free(&tk->pool);
	free(tk->ids);
	free(tk->dec);
	free(tk->dec_bytes);
	free(tk);
}

uint64_t eg_tokenizer_num_ids(const struct eg_tokenizer *tk)
{
	return tk->n_ids;
}

const char *eg_tokenizer_token(const struct eg_tokenizer *tk, uint64_t id, size_t *len)
{
	*len = tk->ids[id].len;
	return tk->pool.s + tk->ids[id].off;
}
