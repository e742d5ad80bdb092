use super::*;
use std::process::Command;
use std::time::Instant;

fn spawn(script: &str) -> std::process::Child {
    Command::new("/bin/sh")
        .args(["-c", script])
        .spawn()
        .expect("spawning /bin/sh")
}

fn pid(child: &std::process::Child) -> i32 {
    i32::try_from(child.id()).unwrap()
}

#[test]
fn the_exited_process_is_left_to_be_reaped_with_its_exit_status() {
    let mut child = spawn("exit 7");
    let accounted = wait_exited(pid(&child)).unwrap();
    assert!(accounted.max_rss_bytes > 0, "{accounted:?}");
    // Not reaped: the owner still gets the real status.
    assert_eq!(child.wait().unwrap().code(), Some(7));
    // And once it is reaped, there is nothing left to wait for.
    let err = wait_exited(pid(&child)).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ECHILD));
}

#[test]
fn cpu_time_of_the_process_and_of_the_children_it_waited_for() {
    // The busy loop runs in a child the shell waits for.
    let started = Instant::now();
    let mut child = spawn("sh -c 'i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done'; true");
    let accounted = wait_exited(pid(&child)).unwrap();
    let wall = started.elapsed();
    child.wait().unwrap();
    let cpu = Duration::from_micros(accounted.user_cpu_us + accounted.system_cpu_us);
    assert!(
        cpu >= Duration::from_millis(20),
        "{accounted:?} in {wall:?}"
    );
    assert!(accounted.user_cpu_us > 0, "{accounted:?}");
    // One process at a time: it cannot have used more CPU than wall time (plus a tick).
    assert!(
        cpu <= wall + Duration::from_millis(20),
        "{cpu:?} > {wall:?}"
    );
}

#[test]
fn peak_memory_includes_a_waited_for_descendant() {
    // dd touches a 48 MiB buffer in a grandchild; the shell itself stays small.
    let mut child = spawn("dd if=/dev/zero of=/dev/null bs=48M count=1 2>/dev/null; true");
    let accounted = wait_exited(pid(&child)).unwrap();
    child.wait().unwrap();
    assert!(
        accounted.max_rss_bytes >= 48 << 20,
        "peak {} bytes",
        accounted.max_rss_bytes
    );
    // (No upper bound for a small process here: a child shares this test binary's memory
    // until its exec, and the kernel counts that in its peak; see the module's docs.)
}

#[test]
fn exited_now_does_not_wait() {
    let mut child = spawn("sleep 5");
    let started = Instant::now();
    assert_eq!(exited_now(pid(&child)), None);
    assert!(started.elapsed() < Duration::from_secs(1));
    child.kill().unwrap();
    let accounted = wait_exited(pid(&child)).unwrap();
    assert_eq!(exited_now(pid(&child)), Some(accounted));
    child.wait().unwrap();
}
