// CKeepAlivePipeWire: one question to PipeWire in its own protocol, what its graph's clock may run at
// (the `settings` metadata: clock.rate, clock.allowed-rates, clock.force-rate), which its pulse
// server does not tell libpulse's clients. A sink stream of keepalived's asks it when a user's
// stream starts on an idle sink, to let the graph take the rate PipeWire would have given that
// stream without keepalived (KeepAlive's SinkRateFollower).
//
// libpipewire-0.3.so.0 is loaded with dlopen on the first question, never linked: a box without
// PipeWire needs none of it. Each question is one short connection of its own, made and closed
// in the call (a few milliseconds): nothing stays connected, no thread is started.
#ifndef CKEEPALIVE_PIPEWIRE_H
#define CKEEPALIVE_PIPEWIRE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// What the graph's clock may run at, as the `settings` metadata says; each string as PipeWire
/// writes it, empty when the metadata has no such key.
typedef struct cpipewire_clock {
    char rate[32];
    char allowed_rates[256];
    char force_rate[32];
} cpipewire_clock;

enum {
    CPIPEWIRE_OK = 0,
    /// libpipewire-0.3.so.0 is not there, or lacks a function (cpipewire_error says which).
    CPIPEWIRE_NO_LIBRARY = -1,
    /// No PipeWire answers at the default remote (PIPEWIRE_REMOTE, the runtime directory).
    CPIPEWIRE_NO_SERVER = -2,
    /// It did not answer within the time given.
    CPIPEWIRE_TIMEOUT = -3,
    /// It has no `settings` metadata.
    CPIPEWIRE_NO_SETTINGS = -4,
};

/// Connects to the default PipeWire, reads its `settings` metadata into `clock`, disconnects.
/// Blocks for at most `timeout_ms`. Returns CPIPEWIRE_OK or one of the failures; thread-safe
/// (each call has its own loop and connection).
int cpipewire_read_clock(cpipewire_clock *clock, int timeout_ms);

/// The last failure's detail in this thread (dlerror's text, the connection's error), or "".
const char *cpipewire_error(void);

#ifdef __cplusplus
}
#endif

#endif
