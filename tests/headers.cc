// The public headers as a C++ program includes them (scripts/check-abi compiles this with -std=c++11 -pedantic
// -Werror and runs it): they parse as C++11, and ENGRAM_INIT gives a struct whose size is set and whose fields
// are zero (the first, a middle and the last field of each are looked at; padding is no field).
#include <engram.h>
#include <engram_pack.h>

int main()
{
	struct engram_session_options so = ENGRAM_INIT(struct engram_session_options);
	engram_io_stats st = ENGRAM_INIT(engram_io_stats);
	struct engram_cachesim_options co = ENGRAM_INIT(struct engram_cachesim_options);
	struct engram_pack_options po = ENGRAM_INIT(struct engram_pack_options);
	struct engram_pack_result pr = ENGRAM_INIT(struct engram_pack_result);

	if (so.size != sizeof(so) || so.max_seqs || so.mode != ENGRAM_MODE_DIRECT || so.row_cache || so.page_cache_bytes)
		return 1;
	if (st.size != sizeof(st) || st.rows || st.lead_hist[0] || st.lead_hist[ENGRAM_LEAD_BUCKETS - 1] || st.disk_bytes)
		return 1;
	if (co.size != sizeof(co) || co.staging_bytes || co.hot_rows || co.n_hot)
		return 1;
	if (po.size != sizeof(po) || po.config_path || po.split != ENGRAM_SPLIT_NONE || po.progress || po.tokenizer_path)
		return 1;
	if (pr.size != sizeof(pr) || pr.raw_bytes || pr.n_files)
		return 1;
	return ENGRAM_INIT(struct engram_store_info).size == sizeof(struct engram_store_info) ? 0 : 1;
}
