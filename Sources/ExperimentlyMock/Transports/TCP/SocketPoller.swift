#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// Readiness of one registered descriptor, as reported by `SocketPoller.wait`.
struct SocketReadiness {
    /// The id the descriptor was registered with.
    var id: UInt64
    /// Data (or end of stream) can be read.
    var readable: Bool
    /// Data can be written.
    var writable: Bool
    /// The peer hung up or the socket has an error.
    var hangup: Bool
}

/// Level-triggered readiness for many sockets on one thread: `epoll(7)` on Linux, `poll(2)`
/// elsewhere. Not thread-safe: only the event loop thread that owns it calls it.
///
/// The toolchain's `Glibc` module does not export `<sys/epoll.h>`, so the three epoll calls are
/// looked up once with `dlsym` and called through C function pointers; the `epoll_event`
/// layout is the kernel ABI (packed, 12 bytes, on x86_64; 16 bytes elsewhere). When the symbols
/// are missing (Darwin, other C libraries) the poller falls back to `poll(2)`.
final class SocketPoller {
    private typealias EpollCreate1 = @convention(c) (Int32) -> Int32
    private typealias EpollCtl = @convention(c) (Int32, Int32, Int32, UnsafeMutableRawPointer?) -> Int32
    private typealias EpollWait = @convention(c) (Int32, UnsafeMutableRawPointer?, Int32, Int32) -> Int32

    private struct Epoll {
        let create1: EpollCreate1
        let ctl: EpollCtl
        let wait: EpollWait

        static let shared: Epoll? = {
            #if os(Linux)
            guard let handle = dlopen(nil, RTLD_NOW),
                  let c = dlsym(handle, "epoll_create1"), let m = dlsym(handle, "epoll_ctl"), let w = dlsym(handle, "epoll_wait")
            else { return nil }
            return Epoll(create1: unsafeBitCast(c, to: EpollCreate1.self), ctl: unsafeBitCast(m, to: EpollCtl.self),
                         wait: unsafeBitCast(w, to: EpollWait.self))
            #else
            return nil
            #endif
        }()
    }

    // Kernel constants (include/uapi/linux/eventpoll.h).
    private static let epollIn: UInt32 = 0x001, epollOut: UInt32 = 0x004, epollErr: UInt32 = 0x008, epollHup: UInt32 = 0x010
    private static let ctlAdd: Int32 = 1, ctlDel: Int32 = 2, ctlMod: Int32 = 3
    private static let cloexec: Int32 = 0o2000000
    #if arch(x86_64)
    private static let eventSize = 12, dataOffset = 4
    #else
    private static let eventSize = 16, dataOffset = 8
    #endif
    private static let maxEvents = 1024

    private let epoll: Epoll?
    private var epollFD: Int32 = -1
    private let eventBuffer: UnsafeMutableRawPointer
    private var interest: [Int32: (id: UInt64, read: Bool, write: Bool)] = [:]

    /// True when readiness comes from epoll (else from poll).
    var usesEpoll: Bool { epoll != nil }

    /// True when this platform's C library has epoll (Linux).
    static var epollAvailable: Bool { Epoll.shared != nil }

    /// Creates the poller; throws `MockHTTPServerError.socket` when the kernel refuses.
    /// `usingPoll` forces the `poll(2)` fallback where epoll exists (tests cover both paths).
    init(usingPoll: Bool = false) throws {
        eventBuffer = UnsafeMutableRawPointer.allocate(byteCount: Self.eventSize * Self.maxEvents, alignment: 8)
        epoll = usingPoll ? nil : Epoll.shared
        if let epoll {
            epollFD = epoll.create1(Self.cloexec)
            guard epollFD >= 0 else {
                let e = errno
                eventBuffer.deallocate()
                throw MockHTTPServerError.socket("epoll_create1", e)
            }
        }
    }

    deinit {
        if epollFD >= 0 { close(epollFD) }
        eventBuffer.deallocate()
    }

    /// Registers `fd` (or changes its interest) under `id`.
    func set(_ fd: Int32, id: UInt64, read: Bool, write: Bool, adding: Bool) {
        guard let epoll else {
            interest[fd] = (id, read, write)
            return
        }
        var mask: UInt32 = 0
        if read { mask |= Self.epollIn }
        if write { mask |= Self.epollOut }
        var event = [UInt8](repeating: 0, count: Self.eventSize)
        event.withUnsafeMutableBytes { raw in
            raw.storeBytes(of: mask, toByteOffset: 0, as: UInt32.self)
            raw.storeBytes(of: id, toByteOffset: Self.dataOffset, as: UInt64.self)
            _ = epoll.ctl(epollFD, adding ? Self.ctlAdd : Self.ctlMod, fd, raw.baseAddress)
        }
    }

    /// Forgets `fd`; call before closing it.
    func remove(_ fd: Int32) {
        guard let epoll else {
            interest[fd] = nil
            return
        }
        var event = [UInt8](repeating: 0, count: Self.eventSize)
        event.withUnsafeMutableBytes { _ = epoll.ctl(epollFD, Self.ctlDel, fd, $0.baseAddress) }
    }

    /// Waits at most `timeoutMilliseconds` (-1: forever) and returns the ready descriptors.
    func wait(timeoutMilliseconds: Int32) -> [SocketReadiness] {
        if let epoll {
            let n = epoll.wait(epollFD, eventBuffer, Int32(Self.maxEvents), timeoutMilliseconds)
            guard n > 0 else { return [] }
            var ready: [SocketReadiness] = []
            ready.reserveCapacity(Int(n))
            for i in 0..<Int(n) {
                let base = eventBuffer + i * Self.eventSize
                let events = base.loadUnaligned(as: UInt32.self)
                let id = (base + Self.dataOffset).loadUnaligned(as: UInt64.self)
                ready.append(SocketReadiness(
                    id: id, readable: events & Self.epollIn != 0, writable: events & Self.epollOut != 0,
                    hangup: events & (Self.epollHup | Self.epollErr) != 0))
            }
            return ready
        }
        let entries = Array(interest)
        var fds = entries.map { entry -> pollfd in
            var mask: Int16 = 0
            if entry.value.read { mask |= Int16(POLLIN) }
            if entry.value.write { mask |= Int16(POLLOUT) }
            return pollfd(fd: entry.key, events: mask, revents: 0)
        }
        let n = poll(&fds, nfds_t(fds.count), timeoutMilliseconds)
        guard n > 0 else { return [] }
        var ready: [SocketReadiness] = []
        for (i, p) in fds.enumerated() where p.revents != 0 {
            ready.append(SocketReadiness(
                id: entries[i].value.id,
                readable: p.revents & Int16(POLLIN) != 0,
                writable: p.revents & Int16(POLLOUT) != 0,
                hangup: p.revents & Int16(POLLHUP | POLLERR | POLLNVAL) != 0))
        }
        return ready
    }
}
