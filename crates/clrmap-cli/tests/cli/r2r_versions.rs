//! ReadyToRun versions on the command line: an image one major above the newest
//! clrmap knows is refused with `unsupported_version` naming both majors, and `--assume-layout`
//! reads it anyway, on every command that reads images.

use crate::support::*;

/// 11.0.0's linux-x64 System.Linq.dll (R2R 26.1) and a copy whose MajorVersion says 27.
fn real_and_one_major_above(test: &str) -> (String, String) {
    let real = dotnet_file("packs/linux-x64/11.0.0/System.Linq.dll");
    let mut bytes = std::fs::read(&real).unwrap();
    // The READYTORUN_HEADER: `RTR\0`, then the u16 MajorVersion.
    let at = bytes.windows(6).position(|w| w == [b'R', b'T', b'R', 0, 26, 0]).expect("the R2R 26 header");
    bytes[at + 4] = 27;
    let dir = std::env::temp_dir().join(format!("clrmap-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let above = dir.join("System.Linq.dll");
    std::fs::write(&above, &bytes).unwrap();
    (real, above.to_string_lossy().into_owned())
}

#[test]
#[ignore = "needs .NET"]
fn an_image_one_major_above_is_refused_and_read_with_assume_layout() {
    let (real, above) = real_and_one_major_above("r2r-versions");
    let want = clrmap(&["il", "dump", &real, "--method", "System.Linq.Enumerable::Count", "--json"]);
    assert_eq!(code(&want), Some(0), "{}", stderr(&want));
    // Refused by every command that reads an image, naming both majors.
    for args in [
        vec!["il", "dump", above.as_str()],
        vec!["il", "at", above.as_str(), "0x1000"],
        vec!["il", "frame", above.as_str(), "0x1000"],
        vec!["il", "vars", above.as_str(), "--method", "System.Linq.Enumerable::Count"],
        vec!["symbolize", above.as_str(), "0x1000"],
    ] {
        let o = clrmap(&args);
        assert_ne!(code(&o), Some(0), "{args:?}");
        let err = stderr(&o);
        assert!(err.contains("error: unsupported_version at offset"), "{args:?}: {err}");
        assert!(err.contains("found version 27, the newest known is 26"), "{args:?}: {err}");
    }
    // With --assume-layout 26 the maps are those of the real image.
    let o = clrmap(&["il", "dump", &above, "--method", "System.Linq.Enumerable::Count", "--json", "--assume-layout", "26"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o).replace(&above, "IMAGE"), stdout(&want).replace(&real, "IMAGE"));
    let o = clrmap(&["il", "vars", &above, "--method", "System.Linq.Enumerable::Count", "--assume-layout", "26"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("arg 0"), "{}", stdout(&o));
    // A major without a known layout is a usage error.
    let o = clrmap(&["il", "dump", &above, "--assume-layout", "27"]);
    assert_eq!(code(&o), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("a ReadyToRun major from 3 to 26"), "{}", stderr(&o));
}
