#if canImport(Glibc)
import Glibc
#endif
import CALSA
import CKeepAliveLinux

/// The process-wide settings `keepalived run` makes before anything starts: how glibc's malloc
/// keeps memory, alsa-lib's error printing, and the mark its ALSA plug-in reads.
enum DaemonProcess {
    static func configure() {
        // One malloc arena for the whole daemon: glibc gives each thread that allocates an arena
        // of its own, each keeping its free pages, and nothing here allocates often enough to
        // contend. Measured with bench/run: 1.63 → 1.59 MB private on PulseAudio.
        mallopt(M_ARENA_MAX, 1)
        // Blocks of 128 KiB and more (a rendered loop: a write of a sink's 8 s buffer is 350 kB)
        // mapped on their own, and unmapped when freed. Left to glibc, the first such free
        // raises the threshold to its size, and every later loop (each open renders one) comes
        // from the heap, whose top alone goes back: scripts/chaos saw the heap go from 0.46 to
        // 2-2.9 MB after the first reopens and stay there. Set, the threshold stays where it is.
        mallopt(M_MMAP_THRESHOLD, 128 * 1024)
        // alsa-lib prints every internal failure (an underrun, a lost server) to stderr; the
        // daemon recovers from those on purpose and reports each once through its logger.
        calsa_silence_library_errors()
        // The `keepalived` ALSA plug-in (the front door) opens the card's own PCM for keepalived's
        // outputs without asking the control socket: this process is the daemon, not a player.
        // Set before any thread starts (setenv is not safe beside another thread's getenv);
        // children inherit it with pids of their own, which the plug-in tells apart.
        setenv("KEEPALIVED_DAEMON_PID", "\(getpid())", 1)
    }
}
