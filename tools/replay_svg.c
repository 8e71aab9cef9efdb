/* engram-stat replay: the SVG chart of the ready rate and the stall share per run (see replay_report.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "replay_report.h"

static void xml_text(FILE *f, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '&': fputs("&amp;", f); break;
		case '"': fputs("&quot;", f); break;
		case '\'': fputs("&apos;", f); break;
		default:
			if ((unsigned char)*s >= 0x20 || *s == '\t')
				fputc(*s, f);
		}
	}
}

/* 1, 2, 2.5 or 5 x 10^k at or above x (x > 0): a tick step. */
static double nice_ceil(double x)
{
	double p = pow(10, floor(log10(x))), m = x / p;

	return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 2.5 ? 2.5 : m <= 5 ? 5 : 10) * p;
}

struct panel {
	double top, height, max;
	const char *title, *color;
	int decimals;
	double line;          /* a dashed reference line at this value; NaN: none */
	const char *line_label;
};

/* A bar per value (v), and across each bar a black mark at its value in mark (NULL or NaN: none). */
static void draw_panel(FILE *f, const struct panel *p, const double *v, const double *mark, size_t n, double x0,
		       double slot)
{
	double bottom = p->top + p->height;

	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\" font-weight=\"bold\">", x0, p->top - 24);
	xml_text(f, p->title);
	fprintf(f, "</text>\n");
	for (int t = 0; t <= 4; t++) {
		double y = bottom - p->height * t / 4, val = p->max * t / 4;
		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", x0, y,
			x0 + slot * (double)n, y);
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">", x0 - 6, y + 4);
		fprintf(f, "%.*f", p->decimals, val);
		fprintf(f, "</text>\n");
	}
	if (!isnan(p->line) && p->line <= p->max) {
		double y = bottom - p->height * p->line / p->max;
		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#2a9d8f\" "
			   "stroke-width=\"1.5\" stroke-dasharray=\"6,4\"/>\n", x0, y, x0 + slot * (double)n, y);
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" fill=\"#2a9d8f\">", x0 + slot * (double)n + 4,
			y + 3);
		xml_text(f, p->line_label);
		fprintf(f, "</text>\n");
	}
	fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>\n", x0, p->top, x0, bottom);
	fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>\n", x0, bottom,
		x0 + slot * (double)n, bottom);
	for (size_t i = 0; i < n; i++) {
		double x = x0 + slot * (double)i + slot * 0.2, w = slot * 0.6;
		double val = isnan(v[i]) ? 0 : v[i], h = p->max > 0 ? p->height * val / p->max : 0;
		if (h > p->height)
			h = p->height;
		fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n", x, bottom - h,
			w, h, p->color);
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"middle\">", x + w / 2,
			bottom - h - 4);
		if (isnan(v[i]))
			fputs("-", f);
		else
			fprintf(f, "%.*f", p->decimals, v[i]);
		fprintf(f, "</text>\n");
		if (mark && !isnan(mark[i]) && p->max > 0) {
			double m = p->height * (mark[i] < p->max ? mark[i] : p->max) / p->max;
			fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\" "
				   "stroke-width=\"2.5\"/>\n", x - 3, bottom - m, x + w + 3, bottom - m);
		}
	}
}

int replay_svg(FILE *f, const struct replay_info *in, const struct replay_result *r, size_t n)
{
	double slot = 90, x0 = 80, width = x0 + slot * (double)n + 70, ph = 170;
	double *hit = malloc((n ? n : 1) * sizeof(*hit)), *p99 = malloc((n ? n : 1) * sizeof(*p99)), top = 0;
	double *floor = malloc((n ? n : 1) * sizeof(*floor));
	int has_floor = 0;
	char title[1200], label[160];
	const char *base = strrchr(in->shard, '/');

	if (!hit || !p99 || !floor) {
		free(hit);
		free(p99);
		free(floor);
		return -1;
	}
	if (width < 680) {
		width = 680;
		slot = (width - x0 - 70) / (double)(n ? n : 1);
		if (slot > 140)
			slot = 140;
	}
	for (size_t i = 0; i < n; i++) {
		hit[i] = 100 * replay_ratio((double)r[i].all.ready, (double)r[i].all.rows);
		p99[i] = in->no_wait ? r[i].stall_us.mean : 100 * r[i].stall_share.mean;
		if (!isnan(p99[i]) && p99[i] > top)
			top = p99[i];
		floor[i] = in->no_wait ? NAN : 100 * r[i].floor_share.mean;
		if (!isnan(floor[i]) && floor[i] > top)
			top = floor[i];
		has_floor |= !isnan(floor[i]);
	}
	if (!in->no_wait && top < 2)
		top = 2; /* the 1% line stays in view */
	double height = 70 + 40 + ph + 60 + ph + 70;
	fprintf(f,
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
		"font-family=\"sans-serif\">\n",
		width, height, width, height);
	fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#fff\"/>\n", width, height);
	snprintf(title, sizeof(title), "engram-stat replay: %s, %s, batch %u, %zu steps", base ? base + 1 : in->shard,
		 in->cold ? "cold" : "warm", in->batch, in->steps);
	fprintf(f, "<text x=\"%.1f\" y=\"24\" font-size=\"15\" font-weight=\"bold\">", x0 - 60);
	xml_text(f, title);
	fprintf(f, "</text>\n<text x=\"%.1f\" y=\"42\" font-size=\"11\">", x0 - 60);
	const char *tb = in->tokens_path ? strrchr(in->tokens_path, '/') : NULL;
	if (in->tokens_path)
		snprintf(title, sizeof(title), "stream %s (%zu sequences), prefill %u", tb ? tb + 1 : in->tokens_path,
			 in->n_seqs, in->prefill);
	else
		snprintf(title, sizeof(title), "stream Zipf(%g), %zu tokens, seed %llu, prefill %u", in->zipf_alpha,
			 in->n_tokens, (unsigned long long)in->seed, in->prefill);
	xml_text(f, title);
	fprintf(f, "</text>\n<text x=\"%.1f\" y=\"58\" font-size=\"11\">", x0 - 60);
	if (in->no_wait)
		snprintf(title, sizeof(title),
			 "no compute time (--no-wait); ready: rows in memory when their gather was called; stall: "
			 "time in the library");
	else
		snprintf(title, sizeof(title),
			 "decode step %g ms of %u layers; ready: rows in memory when their gather was called; stall: the "
			 "engine's time in the library / compute",
			 in->step_ms, in->layers_total);
	xml_text(f, title);
	fprintf(f, "</text>\n");
	struct panel hp = { .top = 110,
			    .height = ph,
			    .max = 100,
			    .title = "ready rate (% of rows in memory when their gather was called)",
			    .decimals = 1,
			    .color = "#4c78a8",
			    .line = NAN };
	struct panel sp = { .top = 110 + ph + 60,
			    .height = ph,
			    .max = top > 0 ? 4 * nice_ceil(top / 4) : 1,
			    .title = in->no_wait ? "time in the library per step (microseconds, mean)"
						 : "stall share (% of the step's compute spent in the library, mean)",
			    .decimals = in->no_wait ? 0 : 1,
			    .color = "#e45756",
			    .line = in->no_wait ? NAN : 1.0,
			    .line_label = "1%: free" };
	if (has_floor)
		sp.title = "stall share (% of the step's compute spent in the library, mean); black: the disk's floor";
	draw_panel(f, &hp, hit, NULL, n, x0, slot);
	draw_panel(f, &sp, p99, has_floor ? floor : NULL, n, x0, slot);
	for (size_t i = 0; i < n; i++) {
		replay_setting_label(label, sizeof(label), in->sweep ? in->sweep : SWEEP_DEPTH, &r[i].set, ", ");
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">",
			x0 + slot * ((double)i + 0.5), sp.top + ph + 18);
		/* one setting per line */
		char *save = NULL;
		double dy = 0;
		for (char *part = strtok_r(label, ",", &save); part; part = strtok_r(NULL, ",", &save)) {
			while (*part == ' ')
				part++;
			fprintf(f, "<tspan x=\"%.1f\" dy=\"%.0f\">", x0 + slot * ((double)i + 0.5), dy);
			xml_text(f, part);
			fprintf(f, "</tspan>");
			dy = 13;
		}
		fprintf(f, "</text>\n");
	}
	fprintf(f, "</svg>\n");
	free(hit);
	free(p99);
	free(floor);
	return ferror(f) ? -1 : 0;
}
