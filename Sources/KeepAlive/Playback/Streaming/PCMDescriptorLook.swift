import Glibc

/// What a poll of a PCM's descriptors would report now, without waiting: plug-ins signal a failed
/// stream, hardware an xrun or an unplug, through them. The descriptors are fetched once, at the
/// open, so a look allocates nothing.
///
/// ```swift
/// let look = try PCMDescriptorLook(pcm: pcm)
/// if let code = look.streamError() { print("the stream failed: \(code)") }
/// ```
final class PCMDescriptorLook {
    let pcm: PCMDevice
    private var descriptors: [pollfd]

    init(pcm: PCMDevice) throws(ALSAError) {
        self.pcm = pcm
        descriptors = try pcm.pollDescriptors()
    }

    /// The stream error the descriptors report (a negative errno), nil when none.
    func streamError() -> Int32? {
        let pcm = pcm
        let events = descriptors.withUnsafeMutableBufferPointer { fds -> Int32 in
            pcm.refreshPollDescriptors(fds.baseAddress!, count: fds.count)
            for index in fds.indices { fds[index].revents = 0 }
            _ = poll(fds.baseAddress, nfds_t(fds.count), 0)
            return pcm.revents(fds.baseAddress!, count: fds.count)
        }
        return pcm.streamError(fromEvents: events)
    }
}
