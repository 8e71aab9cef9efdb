/* The whole of the remote client, internals included: its progress (remote.h) and its state (remote_state.h), for
 * what drives it from outside its rooms (the fuzz target). */
#ifndef ENGRAM_REMOTE_CLIENT_H
#define ENGRAM_REMOTE_CLIENT_H

#include "remote.h"
#include "remote_state.h"

#endif
