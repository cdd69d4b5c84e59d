import Glibc

/// The process's soft descriptor limit (RLIMIT_NOFILE), lowered so that exactly `free` more
/// descriptors can be made: how a test stands in for a process out of descriptors (EMFILE). The
/// kernel hands out the lowest free number and refuses one at or past the limit, so the limit is
/// put at the number the next descriptor after `free` would get, whatever holes lie below it.
///
/// For an exit test's child only (`#expect(processExitsWith:)`): in the test runner's own process
/// every test running beside it would be refused too. Returns the limit to restore.
public func leaveDescriptors(_ free: Int) -> rlimit {
    var numbers: [Int32] = []
    for _ in 0...free { numbers.append(open("/dev/null", O_RDONLY | O_CLOEXEC)) }
    precondition(numbers.allSatisfy { $0 >= 0 }, "cannot open /dev/null: errno \(errno)")
    let limit = numbers[free]
    for number in numbers { close(number) }
    var before = rlimit()
    precondition(getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &before) == 0)
    var lowered = before
    lowered.rlim_cur = rlim_t(limit)
    precondition(setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &lowered) == 0, "setrlimit: errno \(errno)")
    return before
}

/// Puts back the limit ``leaveDescriptors(_:)`` returned.
public func restoreDescriptorLimit(_ limit: rlimit) {
    var limit = limit
    precondition(setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0, "setrlimit: errno \(errno)")
}
