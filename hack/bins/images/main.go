// imagetool writes a one-layer OCI image (docker-archive tarball, platform linux/amd64 set) from local files,
// so the local cluster's images are built without a registry or a container engine:
//
//	imagetool -tag registry.k8s.io/sig-storage/csi-provisioner:v6.3.0 -out provisioner.tar \
//	  -entrypoint /csi-provisioner -user 65532 -add /csi-provisioner=/path/to/binary [-add /dir=/src/dir]...
//
// Each -add puts a file, or a directory tree, at a path in the image; parents are created, owned by root.
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

// epoch keeps layers reproducible: the same inputs give the same image digest.
var epoch = time.Unix(0, 0)

func main() {
	var adds, envs, entrypoint list
	tag := flag.String("tag", "", "image reference, e.g. registry.k8s.io/pause:3.10.2")
	out := flag.String("out", "", "tarball to write")
	user := flag.String("user", "", "user the image runs as (uid or uid:gid)")
	workdir := flag.String("workdir", "/", "working directory")
	flag.Var(&adds, "add", "IMAGE_PATH=HOST_PATH: a file or directory tree (repeatable)")
	flag.Var(&envs, "env", "KEY=VALUE (repeatable)")
	flag.Var(&entrypoint, "entrypoint", "entrypoint argument (repeatable, in order)")
	flag.Parse()
	if *tag == "" || *out == "" || len(adds) == 0 {
		fmt.Fprintln(os.Stderr, "imagetool: -tag, -out and at least one -add are required")
		os.Exit(2)
	}
	if err := build(*tag, *out, *user, *workdir, adds, envs, entrypoint); err != nil {
		fmt.Fprintf(os.Stderr, "imagetool: %s: %v\n", *tag, err)
		os.Exit(1)
	}
}

func build(tag, out, user, workdir string, adds, envs, entrypoint []string) error {
	ref, err := name.NewTag(tag)
	if err != nil {
		return err
	}
	layerTar, err := layer(adds)
	if err != nil {
		return err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerTar)), nil })
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", "amd64", v1.Time{Time: epoch}
	cf.Config.Entrypoint = entrypoint
	cf.Config.User = user
	cf.Config.WorkingDir = workdir
	cf.Config.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, envs...)
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(out, ref, img)
}

// layer returns an uncompressed tar of every -add, with parent directories, sorted for reproducibility.
func layer(adds []string) ([]byte, error) {
	type entry struct {
		src  string
		info os.FileInfo
	}
	entries := map[string]entry{}
	for _, a := range adds {
		dst, src, ok := strings.Cut(a, "=")
		if !ok || !path.IsAbs(dst) {
			return nil, fmt.Errorf("-add %q: want /image/path=host/path", a)
		}
		// The root itself is followed (the bin directory holds symlinks); links inside a tree stay links.
		src, err := filepath.EvalSymlinks(src)
		if err != nil {
			return nil, err
		}
		err = filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(src, p)
			entries[path.Join(dst, filepath.ToSlash(rel))] = entry{p, info}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	// Parents of every entry, as plain root-owned directories.
	for p := range entries {
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if _, ok := entries[d]; !ok {
				entries[d] = entry{}
			}
		}
	}
	names := make([]string, 0, len(entries))
	for p := range entries {
		names = append(names, p)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range names {
		e := entries[p]
		hdr := &tar.Header{Name: strings.TrimPrefix(p, "/"), ModTime: epoch, Typeflag: tar.TypeDir, Mode: 0o755}
		var body []byte
		switch {
		case e.info == nil || e.info.IsDir():
			hdr.Name += "/"
			if e.info != nil {
				hdr.Mode = int64(e.info.Mode().Perm())
			}
		case e.info.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(e.src)
			if err != nil {
				return nil, err
			}
			hdr.Typeflag, hdr.Linkname, hdr.Mode = tar.TypeSymlink, target, 0o777
		case e.info.Mode().IsRegular():
			b, err := os.ReadFile(e.src)
			if err != nil {
				return nil, err
			}
			body = b
			hdr.Typeflag, hdr.Size, hdr.Mode = tar.TypeReg, int64(len(b)), int64(e.info.Mode().Perm())
		default:
			return nil, fmt.Errorf("%s: not a file, directory or symlink", e.src)
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
