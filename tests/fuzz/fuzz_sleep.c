/* Not fuzzed: a target that hangs on an input beginning with "hang", so that test_fuzz_replay can check that
 * the replay's per-input time limit names the input. */
#include <string.h>
#include <unistd.h>

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size >= 4 && !memcmp(data, "hang", 4))
		for (;;)
			pause();
	return 0;
}
