// An int32 numpy (format 1.0) file of VALUES, for the reference scripts here.
'use strict';

function npyInt32(values) {
	let header = `{'descr': '<i4', 'fortran_order': False, 'shape': (${values.length},), }`;
	const pad = 64 - ((10 + header.length + 1) % 64);
	header += ' '.repeat(pad === 64 ? 0 : pad) + '\n';
	const head = Buffer.alloc(10);
	Buffer.from([0x93]).copy(head, 0);
	head.write('NUMPY', 1, 'latin1');
	head[6] = 1;
	head[7] = 0;
	head.writeUInt16LE(header.length, 8);
	const data = Buffer.alloc(values.length * 4);
	values.forEach((v, i) => data.writeInt32LE(v, i * 4));
	return Buffer.concat([head, Buffer.from(header, 'latin1'), data]);
}

module.exports = { npyInt32 };
