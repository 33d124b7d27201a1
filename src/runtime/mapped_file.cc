#include "runtime/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "support/error.h"

namespace kiln::runtime {

std::shared_ptr<MappedFile> MappedFile::open(const std::string& path, bool populate) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    KILN_CHECK(fd >= 0, kIOError) << "cannot open '" << path << "': " << std::strerror(errno);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        const int err = errno;
        close(fd);
        KILN_THROW(kIOError) << "cannot stat '" << path << "': " << std::strerror(err);
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        KILN_THROW(kIOError) << "cannot map '" << path << "': " << (S_ISDIR(st.st_mode) ? "is a directory" : "not a regular file");
    }
    std::shared_ptr<MappedFile> m(new MappedFile());
    m->size_ = static_cast<size_t>(st.st_size);
    if (m->size_ > 0) {
        void* p = mmap(nullptr, m->size_, PROT_READ, MAP_PRIVATE | (populate ? MAP_POPULATE : 0), fd, 0);
        const int err = errno;
        if (p == MAP_FAILED) {
            close(fd);
            KILN_THROW(kIOError) << "cannot map '" << path << "' (" << m->size_ << " bytes): " << std::strerror(err);
        }
        m->data_ = static_cast<const uint8_t*>(p);
    }
    close(fd);  // the mapping keeps the file
    return m;
}

MappedFile::~MappedFile() {
    if (data_) munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace kiln::runtime
