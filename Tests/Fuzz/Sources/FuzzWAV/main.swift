import FuzzerDriver
#if canImport(Glibc)
import Glibc
#endif

var argc = CommandLine.argc
var argv = Optional(CommandLine.unsafeArgv)
exit(LLVMFuzzerRunDriver(&argc, &argv) { fuzzWAV($0, $1) })
