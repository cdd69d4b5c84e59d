// The declaration in include/FuzzerDriver.h is all there is: libFuzzer, linked by
// -sanitize=fuzzer, defines the function. SwiftPM needs one source file per C target.
#include "FuzzerDriver.h"
