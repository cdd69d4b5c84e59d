#ifndef FUZZER_DRIVER_H
#define FUZZER_DRIVER_H

#include <stddef.h>
#include <stdint.h>

/// libFuzzer's entry for programs that have their own main (libFuzzer >= 11). SwiftPM gives
/// every executable target a main of its own, so the targets call this instead of relying on
/// libFuzzer's main.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*test_one_input)(const uint8_t *data, size_t size));

#endif
