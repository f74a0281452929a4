package faultfs

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// serve mounts backing at mnt and answers the commands of the test on in
// (arm, disarm, quit) on out, until quit or the end of in.
func serve(backing, mnt string, in io.Reader, out io.Writer) error {
	inj := &injector{}
	var st syscall.Stat_t
	if err := syscall.Stat(backing, &st); err != nil {
		return err
	}
	root := &fs.LoopbackRoot{Path: backing, Dev: uint64(st.Dev)}
	root.NewNode = func(r *fs.LoopbackRoot, _ *fs.Inode, _ string, _ *syscall.Stat_t) fs.InodeEmbedder {
		return &node{LoopbackNode: fs.LoopbackNode{RootData: r}, inj: inj}
	}
	root.RootNode = root.NewNode(root, nil, "", &st)
	server, err := fs.Mount(mnt, root.RootNode, &fs.Options{MountOptions: fuse.MountOptions{
		FsName: "vnet-faultfs", Name: "faultfs", DirectMount: true,
	}})
	if err != nil {
		return fmt.Errorf("mount %s: %w", mnt, err)
	}
	defer server.Unmount()
	fmt.Fprintln(out, "ready")
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		switch fields[0] {
		case "arm":
			n, fault, err := parseArm(sc.Text())
			if err != nil {
				return err
			}
			inj.arm(n, fault)
			fmt.Fprintln(out, "ok")
		case "disarm":
			n, fired := inj.disarm()
			fmt.Fprintln(out, n, fired)
		case "quit":
			return nil
		default:
			return fmt.Errorf("unknown command %q", fields[0])
		}
	}
	return sc.Err()
}

// injector counts the requests that change something and fails the one
// it was armed for.
type injector struct {
	mu       sync.Mutex
	armed    bool
	n, count int
	fault    Fault
	fired    bool
	failNext bool // the request after a short write fails
}

func (i *injector) arm(n int, f Fault) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.armed, i.n, i.fault, i.count, i.fired, i.failNext = true, n, f, 0, false, false
}

func (i *injector) disarm() (int, bool) {
	i.mu.Lock()
	defer i.mu.Unlock()
	n, fired := i.count, i.fired
	i.armed, i.count, i.fired, i.failNext = false, 0, false, false
	return n, fired
}

// hit counts a request and says how it fails: with an errno, cut short
// (a write), or not at all (0, false).
func (i *injector) hit(write bool) (syscall.Errno, bool) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.count++
	switch {
	case !i.armed:
		return 0, false
	case i.failNext:
		i.failNext = false
		return i.fault.Errno, false
	case i.count == i.n:
		i.fired = true
		if i.fault.Short && write {
			i.failNext = true
			return 0, true
		}
		return i.fault.Errno, false
	case i.count > i.n && i.fault.Persist:
		return i.fault.Errno, false
	}
	return 0, false
}

// node is a loopback node whose requests that change something go
// through the injector.
type node struct {
	fs.LoopbackNode
	inj *injector
}

var (
	_ fs.NodeCreater        = (*node)(nil)
	_ fs.NodeOpener         = (*node)(nil)
	_ fs.NodeOpendirHandler = (*node)(nil)
	_ fs.NodeSetattrer      = (*node)(nil)
)

// fail is the errno a request that changes something fails with, 0 for
// none.
func (n *node) fail() syscall.Errno {
	errno, _ := n.inj.hit(false)
	return errno
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if errno := n.fail(); errno != 0 {
		return nil, nil, 0, errno
	}
	ch, fh, fl, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	return ch, &file{lf: fh, inj: n.inj}, fl, 0
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_TRUNC != 0 {
		if errno := n.fail(); errno != 0 {
			return nil, 0, errno
		}
	}
	fh, fl, errno := n.LoopbackNode.Open(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	return &file{lf: fh, inj: n.inj}, fl, 0
}

func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, fl, errno := n.LoopbackNode.OpendirHandle(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	return &dir{h: fh, inj: n.inj}, fl, 0
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if errno := n.fail(); errno != 0 {
		return nil, errno
	}
	return n.LoopbackNode.Mkdir(ctx, name, mode, out)
}

func (n *node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if errno := n.fail(); errno != 0 {
		return nil, errno
	}
	return n.LoopbackNode.Mknod(ctx, name, mode, rdev, out)
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	if errno := n.fail(); errno != 0 {
		return errno
	}
	return n.LoopbackNode.Rmdir(ctx, name)
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	if errno := n.fail(); errno != 0 {
		return errno
	}
	return n.LoopbackNode.Unlink(ctx, name)
}

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if errno := n.fail(); errno != 0 {
		return errno
	}
	return n.LoopbackNode.Rename(ctx, name, newParent, newName, flags)
}

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if errno := n.fail(); errno != 0 {
		return nil, errno
	}
	return n.LoopbackNode.Link(ctx, target, name, out)
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if errno := n.fail(); errno != 0 {
		return nil, errno
	}
	return n.LoopbackNode.Symlink(ctx, target, name, out)
}

// Setattr counts a truncation made by name; one made through an open
// file is the file's (file.Setattr).
func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if _, size := in.GetSize(); size && f == nil {
		if errno := n.fail(); errno != 0 {
			return errno
		}
	}
	return n.LoopbackNode.Setattr(ctx, f, in, out)
}

// file is an open file whose writes, syncs, truncations and allocations
// go through the injector. It does not offer its descriptor for the
// kernel's passthrough, which would write without asking the server.
type file struct {
	lf  fs.FileHandle
	inj *injector
}

func (f *file) fail(write bool) (syscall.Errno, bool) { return f.inj.hit(write) }

func (f *file) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return f.lf.(fs.FileReader).Read(ctx, buf, off)
}

func (f *file) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	errno, short := f.fail(true)
	if errno != 0 {
		return 0, errno
	}
	if short {
		if len(data) < 2 {
			return 0, f.inj.fault.Errno
		}
		data = data[:len(data)/2]
	}
	return f.lf.(fs.FileWriter).Write(ctx, data, off)
}

func (f *file) Writev(ctx context.Context, data [][]byte, off int64) (uint32, syscall.Errno) {
	var all []byte
	for _, d := range data {
		all = append(all, d...)
	}
	return f.Write(ctx, all, off)
}

func (f *file) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	if errno, short := f.fail(false); errno != 0 || short {
		return orEIO(errno)
	}
	return f.lf.(fs.FileFsyncer).Fsync(ctx, flags)
}

func (f *file) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	if errno, short := f.fail(false); errno != 0 || short {
		return orEIO(errno)
	}
	return f.lf.(fs.FileAllocater).Allocate(ctx, off, size, mode)
}

func (f *file) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if _, size := in.GetSize(); size {
		if errno, short := f.fail(false); errno != 0 || short {
			return orEIO(errno)
		}
	}
	return f.lf.(fs.FileSetattrer).Setattr(ctx, in, out)
}

func (f *file) Flush(ctx context.Context) syscall.Errno {
	return f.lf.(fs.FileFlusher).Flush(ctx)
}

func (f *file) Release(ctx context.Context) syscall.Errno {
	return f.lf.(fs.FileReleaser).Release(ctx)
}

func (f *file) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return f.lf.(fs.FileGetattrer).Getattr(ctx, out)
}

func (f *file) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return f.lf.(fs.FileLseeker).Lseek(ctx, off, whence)
}

// dir is an open directory whose syncs go through the injector.
type dir struct {
	h   fs.FileHandle
	inj *injector
}

func (d *dir) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	return d.h.(fs.FileReaddirenter).Readdirent(ctx)
}

func (d *dir) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	return d.h.(fs.FileSeekdirer).Seekdir(ctx, off)
}

func (d *dir) Releasedir(ctx context.Context, flags uint32) {
	d.h.(fs.FileReleasedirer).Releasedir(ctx, flags)
}

func (d *dir) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	if errno, short := d.inj.hit(false); errno != 0 || short {
		return orEIO(errno)
	}
	return d.h.(fs.FileFsyncdirer).Fsyncdir(ctx, flags)
}

// orEIO is errno, or EIO for a short write's fault met by a request that
// is not a write.
func orEIO(errno syscall.Errno) syscall.Errno {
	if errno == 0 {
		return syscall.EIO
	}
	return errno
}
