package protocol

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Scanner reads a container's stdout and yields the results whose tag matches
// their dispatch id under the nonce. Everything else (lines outside a block,
// blocks with a wrong tag, overlong lines) is noise: it is reported, never
// trusted. Memory stays
// bounded whatever the container prints: a line longer than MaxLine is
// skipped without being buffered, and a block longer than MaxBlock is dropped.
type Scanner struct {
	r        *bufio.Reader
	nonce    string
	MaxLine  int
	MaxBlock int
	// Noise, when set, is called with (a prefix of) each line that is not
	// part of a valid block, and with the reason a block was dropped.
	Noise func(line string)
	// IPC, when set, receives the authentic IPC blocks of the stream
	// transport (stream.go), in order; without it they are noise.
	IPC func(IPCFile)
}

// Default bounds: a result line may be large (the agent's whole answer), but
// never unbounded.
const (
	DefaultMaxLine  = 8 << 20
	DefaultMaxBlock = 8 << 20
)

// NewScanner returns a scanner for results framed with nonce.
func NewScanner(r io.Reader, nonce string) *Scanner {
	return &Scanner{
		r:        bufio.NewReaderSize(r, 64<<10),
		nonce:    nonce,
		MaxLine:  DefaultMaxLine,
		MaxBlock: DefaultMaxBlock,
	}
}

// errLineTooLong marks a line that was skipped because it exceeded MaxLine.
var errLineTooLong = errors.New("line too long")

// Next returns the next well-formed result, or io.EOF when the stream ends.
func (s *Scanner) Next() (Result, error) {
	for {
		line, err := s.readLine()
		if errors.Is(err, errLineTooLong) {
			s.noise(fmt.Sprintf("[skipped a stdout line longer than %d bytes]", s.MaxLine))
			continue
		}
		if err != nil {
			return Result{}, err
		}
		if tag, isIPC := markerTag(line, ipcStartPrefix); isIPC && s.IPC != nil {
			if err := s.readIPC(tag); err != nil {
				return Result{}, err
			}
			continue
		}
		tag, isStart := markerTag(line, startPrefix)
		if !isStart {
			if len(line) > 0 {
				s.noise(string(line))
			}
			continue
		}
		res, ok, err := s.readBlock(tag)
		if err != nil {
			return Result{}, err
		}
		if ok {
			return res, nil
		}
	}
}

// readBlock reads the lines after a start marker up to its end marker and
// checks that the tag authenticates the block's dispatch id.
func (s *Scanner) readBlock(tag string) (Result, bool, error) {
	tag, body, ok, err := s.readBody(tag, startPrefix, endPrefix)
	if !ok || err != nil {
		return Result{}, false, err
	}
	var res Result
	if err := json.Unmarshal(body, &res); err != nil {
		s.noise(fmt.Sprintf("[dropped a result block with invalid JSON: %v]", err))
		return Result{}, false, nil
	}
	if !hmac.Equal([]byte(tag), []byte(ResultTag(s.nonce, res.DispatchID))) {
		s.noise(fmt.Sprintf("[dropped a result block for dispatch %d with a forged tag]", res.DispatchID))
		return Result{}, false, nil
	}
	return res, true, nil
}

// readIPC reads an IPC block and hands it to s.IPC when its tag
// authenticates its sequence number.
func (s *Scanner) readIPC(tag string) error {
	tag, body, ok, err := s.readBody(tag, ipcStartPrefix, ipcEndPrefix)
	if !ok || err != nil {
		return err
	}
	var f IPCFile
	if err := json.Unmarshal(body, &f); err != nil {
		s.noise(fmt.Sprintf("[dropped an IPC block with invalid JSON: %v]", err))
		return nil
	}
	if !hmac.Equal([]byte(tag), []byte(IPCTag(s.nonce, f.Seq))) {
		s.noise(fmt.Sprintf("[dropped IPC block %d with a forged tag]", f.Seq))
		return nil
	}
	s.IPC(f)
	return nil
}

// readBody reads a block's lines up to the end marker of its tag. A start
// marker inside restarts the block (with its own tag, returned); ok is false
// for a block too big to keep.
func (s *Scanner) readBody(tag, startPrefix, endPrefix string) (_ string, body []byte, ok bool, err error) {
	end := []byte(endPrefix + tag + markerSuffix)
	tooBig := false
	for {
		line, err := s.readLine()
		if errors.Is(err, errLineTooLong) {
			tooBig = true
			continue
		}
		if err != nil {
			if err == io.EOF {
				s.noise("[stdout ended inside a block]")
			}
			return "", nil, false, err
		}
		if bytes.Equal(line, end) {
			break
		}
		if t, ok := markerTag(line, startPrefix); ok { // a restarted block: forget the partial one
			tag, end, body, tooBig = t, []byte(endPrefix+t+markerSuffix), body[:0], false
			continue
		}
		if len(body)+len(line) > s.MaxBlock {
			tooBig = true
			continue
		}
		body = append(body, line...)
		body = append(body, '\n')
	}
	if tooBig {
		s.noise(fmt.Sprintf("[dropped a block larger than %d bytes]", s.MaxBlock))
		return "", nil, false, nil
	}
	return tag, body, true, nil
}

// markerTag returns the tag of a marker line with the given prefix.
func markerTag(line []byte, prefix string) (string, bool) {
	rest, ok := bytes.CutPrefix(line, []byte(prefix))
	if !ok {
		return "", false
	}
	tag, ok := bytes.CutSuffix(rest, []byte(markerSuffix))
	if !ok || len(tag) == 0 || len(tag) > 128 {
		return "", false
	}
	return string(tag), true
}

// readLine returns one line without its newline. A line longer than MaxLine
// is consumed and reported as errLineTooLong without being kept.
func (s *Scanner) readLine() ([]byte, error) {
	var line []byte
	for {
		frag, err := s.r.ReadSlice('\n')
		if len(line)+len(frag) > s.MaxLine+1 {
			if err := s.skipRestOfLine(err); err != nil {
				return nil, err
			}
			return nil, errLineTooLong
		}
		line = append(line, frag...)
		switch {
		case err == nil:
			return bytes.TrimRight(line, "\r\n"), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && len(line) > 0:
			return line, nil
		default:
			return nil, err
		}
	}
}

func (s *Scanner) skipRestOfLine(err error) error {
	for errors.Is(err, bufio.ErrBufferFull) {
		_, err = s.r.ReadSlice('\n')
	}
	if err == io.EOF {
		return nil
	}
	return err
}

func (s *Scanner) noise(line string) {
	if s.Noise == nil {
		return
	}
	const maxNoise = 512
	if len(line) > maxNoise {
		line = line[:maxNoise] + "…"
	}
	s.Noise(line)
}
