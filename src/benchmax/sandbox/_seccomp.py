"""A seccomp filter for bubblewrap's ``--seccomp FD``: refuse the syscalls sandboxes never need.

The list follows what container runtimes refuse by default: kernel keyrings
(not namespaced), BPF and perf events, io_uring, module and kexec loading,
mounting and namespace switching, clock and swap changes, handle-based opens
(the classic container escape), ptrace and cross-process memory access. Each
returns ``EPERM``. Syscalls of any other ABI than the native one (x32, i386 on
x86_64) are refused as a whole, so the list cannot be bypassed through them.

The program is classic BPF, assembled here: ``libseccomp``'s Python binding is
not on PyPI, and the filter is a flat list of comparisons. Numbers come from
the kernel's ``unistd`` tables for each architecture; a test checks them
against the installed kernel headers where those exist.
"""

from __future__ import annotations

import errno
import platform
import struct

_BPF_LD_W_ABS = 0x20
_BPF_JEQ_K = 0x15
_BPF_JGE_K = 0x35
_BPF_RET_K = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_X32_BIT = 0x40000000

DENIED = (
    "acct", "add_key", "bpf", "clock_adjtime", "clock_settime", "delete_module", "finit_module",
    "fsconfig", "fsmount", "fsopen", "fspick", "init_module", "io_uring_enter", "io_uring_register",
    "io_uring_setup", "kexec_file_load", "kexec_load", "keyctl", "lookup_dcookie", "mount",
    "mount_setattr", "move_mount", "name_to_handle_at", "nfsservctl", "open_by_handle_at", "open_tree",
    "perf_event_open", "pivot_root", "process_vm_readv", "process_vm_writev", "ptrace", "quotactl",
    "reboot", "request_key", "setns", "settimeofday", "swapoff", "swapon", "syslog", "umount2",
    "unshare", "userfaultfd", "vhangup", "adjtimex", "iopl", "ioperm", "uselib",
)  # fmt: skip
"""Syscall names refused inside every local sandbox (where the architecture has them)."""

SYSCALLS: dict[str, tuple[int, dict[str, int]]] = {
    # AUDIT_ARCH_X86_64; numbers from arch/x86/entry/syscalls/syscall_64.tbl
    "x86_64": (
        0xC000003E,
        {
            "acct": 163, "add_key": 248, "adjtimex": 159, "bpf": 321, "clock_adjtime": 305,
            "clock_settime": 227, "delete_module": 176, "finit_module": 313, "fsconfig": 431,
            "fsmount": 432, "fsopen": 430, "fspick": 433, "init_module": 175, "io_uring_enter": 426,
            "io_uring_register": 427, "io_uring_setup": 425, "ioperm": 173, "iopl": 172,
            "kexec_file_load": 320, "kexec_load": 246, "keyctl": 250, "lookup_dcookie": 212,
            "mount": 165, "mount_setattr": 442, "move_mount": 429, "name_to_handle_at": 303,
            "nfsservctl": 180, "open_by_handle_at": 304, "open_tree": 428, "perf_event_open": 298,
            "pivot_root": 155, "process_vm_readv": 310, "process_vm_writev": 311, "ptrace": 101,
            "quotactl": 179, "reboot": 169, "request_key": 249, "setns": 308, "settimeofday": 164,
            "swapoff": 168, "swapon": 167, "syslog": 103, "umount2": 166, "unshare": 272,
            "uselib": 134, "userfaultfd": 323, "vhangup": 153,
        },
    ),
    # AUDIT_ARCH_AARCH64; numbers from include/uapi/asm-generic/unistd.h
    "aarch64": (
        0xC00000B7,
        {
            "acct": 89, "add_key": 217, "adjtimex": 171, "bpf": 280, "clock_adjtime": 266,
            "clock_settime": 112, "delete_module": 106, "finit_module": 273, "fsconfig": 431,
            "fsmount": 432, "fsopen": 430, "fspick": 433, "init_module": 105, "io_uring_enter": 426,
            "io_uring_register": 427, "io_uring_setup": 425, "kexec_file_load": 294, "kexec_load": 104,
            "keyctl": 219, "lookup_dcookie": 18, "mount": 40, "mount_setattr": 442, "move_mount": 429,
            "name_to_handle_at": 264, "nfsservctl": 42, "open_by_handle_at": 265, "open_tree": 428,
            "perf_event_open": 241, "pivot_root": 41, "process_vm_readv": 270, "process_vm_writev": 271,
            "ptrace": 117, "quotactl": 60, "reboot": 142, "request_key": 218, "setns": 268,
            "settimeofday": 170, "swapoff": 225, "swapon": 224, "syslog": 116, "umount2": 39,
            "unshare": 97, "userfaultfd": 282, "vhangup": 58,
        },
    ),
}  # fmt: skip


def _instruction(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def supported(machine: str | None = None) -> bool:
    """Whether a filter exists for this CPU architecture."""
    return (machine or platform.machine()) in SYSCALLS


def filter_program(machine: str | None = None) -> bytes:
    """The raw BPF program (an array of ``struct sock_filter``) for ``machine``."""
    arch, numbers = SYSCALLS[machine or platform.machine()]
    denied = sorted({numbers[name] for name in DENIED if name in numbers})
    deny_errno = _RET_ERRNO | errno.EPERM
    body: list[tuple[int, int, int, int]] = [(_BPF_LD_W_ABS, 0, 0, 4)]  # seccomp_data.arch
    # wrong architecture: jump to the final deny; patched below once its index is known
    body.append((_BPF_JEQ_K, 0, 0xFF, arch))
    body.append((_BPF_LD_W_ABS, 0, 0, 0))  # seccomp_data.nr
    if arch == SYSCALLS["x86_64"][0]:
        body.append((_BPF_JGE_K, 0xFF, 0, _X32_BIT))
    checks_start = len(body)
    body.extend((_BPF_JEQ_K, 0xFF, 0, number) for number in denied)
    allow_index = len(body)
    deny_index = allow_index + 1
    program = bytearray()
    for index, (code, jt, jf, k) in enumerate(body):
        if jt == 0xFF:
            jt = deny_index - index - 1
        if jf == 0xFF:
            jf = deny_index - index - 1
        if jt > 255 or jf > 255:
            raise AssertionError("seccomp program too long for 8-bit jumps")
        program += _instruction(code, jt, jf, k)
    program += _instruction(_BPF_RET_K, 0, 0, _RET_ALLOW)
    program += _instruction(_BPF_RET_K, 0, 0, deny_errno)
    assert checks_start < allow_index
    return bytes(program)
