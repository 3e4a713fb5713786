"""System libraries as cc_library targets, with link flags read from Debian's pkg-config files.

Headers need no declaration: /usr/include is a built-in include directory of Bazel's
auto-configured GCC toolchain. Runs offline, at fetch time.
"""

def _split(text):
    # Bazel 4's Starlark split() needs an explicit separator.
    return [f for f in text.strip().split(" ") if f]

def _pkg_config_repository_impl(rctx):
    pkg_config = rctx.which("pkg-config")
    if not pkg_config:
        fail("pkg-config not found: run tools/setup.sh")
    lines = ['package(default_visibility = ["//visibility:public"])', ""]
    for name in sorted(rctx.attr.modules.keys()):
        modules = rctx.attr.modules[name]
        linkopts, defines = [], []
        if modules:
            libs = rctx.execute([pkg_config, "--libs"] + modules)
            if libs.return_code != 0:
                fail("pkg-config --libs %s failed: %s (run tools/setup.sh)" % (" ".join(modules), libs.stderr))
            linkopts = _split(libs.stdout)
            cflags = rctx.execute([pkg_config, "--cflags-only-other"] + modules)
            for flag in _split(cflags.stdout):
                if flag.startswith("-D"):
                    defines.append(flag[2:])
                elif flag == "-pthread":
                    linkopts.append(flag)
        linkopts = linkopts + rctx.attr.extra_linkopts.get(name, [])
        lines += [
            "cc_library(",
            "    name = %r," % name,
            "    defines = %r," % defines,
            "    linkopts = %r," % linkopts,
        ]
        if name in rctx.attr.visible_to:
            lines.append("    visibility = %r," % rctx.attr.visible_to[name])
        lines += [")", ""]
    rctx.file("WORKSPACE", 'workspace(name = "%s")\n' % rctx.name)
    rctx.file("BUILD", "\n".join(lines))

pkg_config_repository = repository_rule(
    implementation = _pkg_config_repository_impl,
    attrs = {
        "modules": attr.string_list_dict(mandatory = True),
        "extra_linkopts": attr.string_list_dict(),
        # Per library: who may depend on it (default: everyone).
        "visible_to": attr.string_list_dict(),
    },
    local = True,
    environ = ["PKG_CONFIG_PATH"],
)
