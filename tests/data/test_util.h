// Helpers for the data tests: a scratch directory per test and a way to run a Python script
// (numpy) that writes the fixtures, so files come from numpy's own writers, not Kiln's.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace kiln::data::testing {

namespace fs = std::filesystem;

/// A fresh directory removed at the end of the test.
class ScratchDir {
public:
    ScratchDir() {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        path_ = fs::temp_directory_path() /
                ("kiln_data_" + std::to_string(::getpid()) + "_" + info->test_suite_name() + "_" + info->name());
        fs::remove_all(path_);
        fs::create_directories(path_);
    }
    ~ScratchDir() {
        std::error_code ec;
        fs::remove_all(path_, ec);
    }
    std::string str() const { return path_.string(); }
    std::string operator/(const std::string& name) const { return (path_ / name).string(); }

private:
    fs::path path_;
};

inline bool have_numpy() {
    static const bool ok = std::system("python3 -c 'import numpy' >/dev/null 2>&1") == 0;
    return ok;
}

/// Runs `script` with python3 in `dir` (as the working directory); true on success.
inline bool run_python(const ScratchDir& dir, const std::string& script) {
    std::string path = dir / "make_fixture.py";
    std::ofstream(path) << script;
    std::string cmd = "cd '" + dir.str() + "' && python3 make_fixture.py";
    return std::system(cmd.c_str()) == 0;
}

inline void write_file(const std::string& path, const std::string& text) {
    std::ofstream f(path, std::ios::binary);
    f << text;
}

}  // namespace kiln::data::testing

#define KILN_REQUIRE_NUMPY() \
    if (!::kiln::data::testing::have_numpy()) GTEST_SKIP() << "python3 with numpy is not available"
