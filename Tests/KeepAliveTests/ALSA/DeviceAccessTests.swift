#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import KeepAlive

@Suite("What refuses a sound node, and the fix named for it")
struct DeviceAccessTests {
    static let audio: gid_t = 29
    static let service: uid_t = 997

    static func attempt(owner: uid_t = 0, group: gid_t = audio, mode: mode_t, uid: uid_t = service, groups: [gid_t]) -> DeviceAccess.Attempt {
        DeviceAccess.Attempt(owner: owner, group: group, mode: mode, uid: uid, groups: groups)
    }

    @Test("udev's root:audio 660, the process in audio: only a device policy can refuse it")
    func devicePolicy() {
        #expect(Self.attempt(mode: 0o660, groups: [998, Self.audio]).cause == .devicePolicy)
        #expect(Self.attempt(mode: 0o666, groups: [998]).cause == .devicePolicy)
        #expect(Self.attempt(owner: Self.service, group: 0, mode: 0o600, groups: [998]).cause == .devicePolicy)
        #expect(Self.attempt(mode: 0o600, uid: 0, groups: [0]).cause == .devicePolicy)
    }

    @Test("root:audio 660, the process outside audio: the group is missing")
    func missingGroup() {
        #expect(Self.attempt(mode: 0o660, groups: [1000]).cause == .missingGroup)
        #expect(Self.attempt(mode: 0o664, groups: [1000]).cause == .missingGroup)
    }

    @Test("root:root 600 (no udev rules), or a mode short of read-write for the process's class: the mode")
    func fileMode() {
        #expect(Self.attempt(group: 0, mode: 0o600, groups: [Self.audio]).cause == .fileMode)
        #expect(Self.attempt(mode: 0o640, groups: [Self.audio]).cause == .fileMode)
        #expect(Self.attempt(mode: 0o600, groups: [1000]).cause == .fileMode)
        // The owner's bits alone count for the owner, even when the group's would allow it.
        #expect(Self.attempt(owner: Self.service, mode: 0o460, groups: [Self.audio]).cause == .fileMode)
        // The group's bits alone count for a member, even when everybody else's would allow it.
        #expect(Self.attempt(mode: 0o606, groups: [Self.audio]).cause == .fileMode)
    }

    @Test("each explanation names its cause and fix, not another's")
    func wording() {
        let node = "/dev/snd/controlC0"
        let policy = DeviceAccess.explanation(node: node, error: EPERM, attempt: Self.attempt(mode: 0o660, groups: [Self.audio]),
                                              unit: "keepalived-audio.service")
        #expect(policy.hasPrefix("operation not permitted (EPERM): /dev/snd/controlC0 is root:"))
        #expect(policy.contains("device policy of the systemd unit keepalived-audio.service"))
        #expect(policy.contains("systemctl restart keepalived-audio.service"))
        #expect(policy.contains("modprobe@snd.service"))
        #expect(!policy.contains("usermod"))
        let contained = DeviceAccess.explanation(node: node, error: EPERM, attempt: Self.attempt(mode: 0o660, groups: [Self.audio]), unit: nil)
        #expect(contained.contains("device filter of this process's cgroup"))
        #expect(!contained.contains("systemctl"))

        let group = DeviceAccess.explanation(node: node, error: EACCES, attempt: Self.attempt(mode: 0o660, groups: [1000]), unit: nil)
        #expect(group.hasPrefix("permission denied (EACCES): /dev/snd/controlC0 is root:"))
        #expect(group.contains("is not in group"))
        #expect(group.contains("usermod -aG"))
        #expect(group.contains("SupplementaryGroups="))
        #expect(!group.contains("DevicePolicy"))

        let mode = DeviceAccess.explanation(node: node, error: EACCES, attempt: Self.attempt(group: 0, mode: 0o600, groups: [Self.audio]), unit: nil)
        #expect(mode.contains(" 600, a mode that does not let uid 997"))
        #expect(mode.contains("udev's sound rules"))
        #expect(!mode.contains("usermod"))
        #expect(!mode.contains("DevicePolicy"))
    }

    @Test("the unit comes from the process's cgroup v2 path")
    func unitFromCgroup() {
        #expect(DeviceAccess.unit(inCgroup: "/system.slice/keepalived-audio.service") == "keepalived-audio.service")
        #expect(DeviceAccess.unit(inCgroup: "/user.slice/user-1000.slice/user@1000.service/app.slice/keepalived.service") == "keepalived.service")
        #expect(DeviceAccess.unit(inCgroup: "/user.slice/user-1000.slice/session-2.scope") == nil)
        #expect(DeviceAccess.unit(inCgroup: "/") == nil)
    }
}
